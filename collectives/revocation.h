// Revocation: a revoked communicator (ibcoll_comm_revoke) fails every call of its members, in
// flight and later, with Code::revoked, whoever revoked it. The word spreads over the members
// themselves: the first time a member hears it (or revokes), it tells the members at distances
// ±1, ±2, ±4, ... from it around the members' ring. So it reaches every live member in about
// log2(n) hops, with 2 n log2(n) notices in all, and goes around failed members: a live member is
// cut off only if all of its ~2 log2(n) partners have failed.
#pragma once

#include <cstdint>
#include <memory>

#include "base/status.h"
#include "collectives/membership.h"
#include "transport/channel.h"

namespace ibcoll::collectives {

class Revocation {
 public:
  // `key`: the communicator's, the same on every member (its first call's tag).
  Revocation(uint64_t key, std::shared_ptr<const Membership> membership)
      : key_(key), membership_(std::move(membership)) {}

  uint64_t key() const { return key_; }
  bool revoked() const { return revoked_; }
  // What its calls fail with, once revoked.
  const Status& why() const { return why_; }
  // Revoked by job rank `by` (this one, or a member's notice, which `teller` sent): the first
  // time, notes it and tells this member's partners but those two through `channel`. False when
  // it was revoked already.
  bool revoke(transport::Channel& channel, int by, int teller);

 private:
  uint64_t key_;
  std::shared_ptr<const Membership> membership_;
  bool revoked_ = false;
  Status why_;
};

}  // namespace ibcoll::collectives
