#include "collectives/revocation.h"

#include <string>

#include "base/log.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {

bool Revocation::revoke(transport::Channel& channel, int by, int teller) {
  if (revoked_) return false;
  revoked_ = true;
  const std::string communicator = "communicator " + std::to_string(communicator_of(key_));
  why_ = Status(Code::revoked, communicator + " was revoked" +
                                   (by == channel.rank() ? std::string(" by this rank")
                                                         : " by job rank " + std::to_string(by)));
  IBCOLL_LOG(info, why_.message());
  const std::vector<int>& members = membership_->members();
  const int n = membership_->size(), me = membership_->rank();
  const transport::Notice notice{transport::Notice::Kind::revoked, key_, static_cast<uint32_t>(by)};
  const auto tell = [&](int partner) {
    const int peer = members[static_cast<size_t>(partner)];
    if (peer != channel.rank() && peer != by && peer != teller && !channel.peer_failure(peer))
      channel.tell(peer, notice);
  };
  for (int distance = 1; distance < n; distance *= 2) {
    const int ahead = (me + distance) % n, behind = (me - distance % n + n) % n;
    tell(ahead);
    if (behind != ahead) tell(behind);
  }
  return true;
}

}  // namespace ibcoll::collectives
