// SlotExchange: one call's turn in the slot region. Once every member has read what this rank
// put in the same buffer kBuffers calls ago (seen by its later publications), it writes its
// call signature (and data, if any) and publishes them with the call's sequence number; then
// it waits for every member's. Each step is tried once per advance(), so it never blocks.
// Afterwards every member's data can be read until release(), and every member has seen every
// signature, so all reach the same verdict.
// A rank that needs one member's data only (a bcast: the root's; the root itself: nobody's)
// waits for that member alone and compares its signature with that member's. It compares the
// others' in a later call (SlotGroup::unverified): the next that waits for every member, or the
// one SlotGroup::kRunAhead calls on, whose publication has waited for them to publish it; a
// mismatch found there fails that call. So every rank reports a mismatch: the ones that differ
// from the root at once, the others up to kRunAhead calls late, and a root runs ahead of its
// members by up to kRunAhead calls.
#pragma once

#include <cstddef>
#include <optional>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

class SlotExchange {
 public:
  static constexpr int kEveryMember = -1;

  // `source`: the one member whose contribution this rank needs, or kEveryMember.
  SlotExchange(const Group& group, const CallSignature& mine, int source = kEveryMember);
  // Publishes `bytes` (≤ SlotRegion::kDataBytes) of `data` once the buffer is free (ignored
  // once published()), then looks for the others'. True once the contributions this rank needs are
  // visible, or a member it waits on has died (the verdict says which).
  bool advance(const void* data, size_t bytes);
  bool published() const { return published_; }
  // Once advance() is true: ok, a mismatch with the members seen, or a dead member.
  const Status& verdict() const { return verdict_; }
  // The verdict on this rank's earlier calls in which it saw only one member (ok if none): it
  // fails this call once this call has run, since the others need this rank's part of it.
  const Status& earlier_verdict() const { return earlier_; }
  const std::byte* data_of(int member) const;
  // Whether `member` has published this call yet, and if so whether with this rank's signature
  // (ok) or another (the mismatch).
  std::optional<Status> published_by(int member) const;
  // This rank has finished reading the call's buffers.
  void release();
  // The call ends without release() (a deadline passed, the operation failed): the
  // communicator's turns are lost; its members learn it (SlotGroup::abandon).
  void abandon(const Status& why);
  // What it waits for now, in words (CollectiveTask::waiting).
  std::string waiting() const;

 private:
  using Region = transport::shm::SlotRegion;
  using Signature = std::array<uint64_t, Region::kSignatureWords>;
  Region::Buffer& buffer_of(int member, uint64_t sequence) const;
  Region::Buffer& buffer_of(int member) const { return buffer_of(member, sequence_); }
  // True once every member has published call `sequence` (or one has died).
  bool all_published(uint64_t sequence);
  // Whether the signatures of call `sequence` of every member (or of `only`) equal `mine`: the
  // check every call makes, apart from the error that names a mismatch (mismatch_of).
  bool same_signatures(uint64_t sequence, const Signature& mine, int only = kEveryMember) const;
  Status mismatch_of(uint64_t sequence, const Signature& mine, int only = kEveryMember) const;
  // Compares this rank's unverified calls up to `last` (every member has published them) with
  // the members'; a mismatch goes to the earlier verdict. False while a member has not published
  // one; true once done, or a member died.
  bool verified_earlier_calls(uint64_t last);
  // A fruitless look at `member`: now and then, whether it gave up or died (then this call
  // gives up too, and the verdict says why). True once so.
  bool gone(int member);

  SlotGroup& slots_;
  int rank_, size_;
  uint64_t sequence_;
  Signature signature_;
  int source_;
  bool published_ = false;
  bool done_ = false;
  bool released_ = false;
  int next_member_ = 0;  // the next member whose contribution has not been seen
  uint32_t idle_ = 0;
  // Whom the last fruitless look waited on (-1: this rank's own earlier call), and for which
  // slot call.
  int waiting_on_ = -1;
  uint64_t waiting_for_ = 0;
  Status verdict_;
  Status earlier_;
};

}  // namespace ibcoll::collectives
