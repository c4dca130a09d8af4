#include "collectives/slot_group.h"

namespace ibcoll::collectives {

using Region = transport::shm::SlotRegion;

Status SlotGroup::trouble(int member, uint32_t idle) const {
  if (idle % kPollsPerAbandonCheck != 0) return {};
  const Region::Abandoned& abandoned = slot_of(member).abandoned;
  if (const uint64_t call = Region::load(abandoned.call)) {
    const auto code = static_cast<Code>(Region::load(abandoned.code));
    return Status(code, "rank " + std::to_string(member) + " of the communicator gave up on its " +
                            "call " + std::to_string(call) + " (" + code_name(code) +
                            "; its log says why), so this communicator cannot be used any more");
  }
  if (idle % kPollsPerLivenessCheck != 0 ||
      region->alive(local_ranks[static_cast<size_t>(member)])) {
    return {};
  }
  return Status(Code::peer_failed, "rank " + std::to_string(member) + " of the communicator (pid " +
                                       std::to_string(pid_of(member)) + ") has exited");
}

void SlotGroup::abandon(int me, uint64_t sequence, const Status& why) {
  if (!failure.ok()) return;
  failure = Status(why.code(), "communicator " + std::to_string(index) +
                                   " failed in an earlier call (" + why.message() +
                                   "); its node-local turns are lost, so every call on it fails: "
                                   "free it");
  Region::Abandoned& mine = slot_of(me).abandoned;
  Region::store(mine.code, static_cast<uint64_t>(why.code()));
  Region::store(mine.call, sequence);
}

}  // namespace ibcoll::collectives
