#include "collectives/slot_group.h"

#include <cerrno>
#include <cstring>

#include "transport/shm/process.h"

namespace ibcoll::collectives {

using Region = transport::shm::SlotRegion;

const std::string& SlotGroup::why_given_up(const Region::Abandoned& abandoned) const {
  if (cause_passed_on.empty())
    cause_passed_on.assign(abandoned.why, strnlen(abandoned.why, sizeof abandoned.why));
  return cause_passed_on;
}

std::string SlotGroup::who(int member) const {
  return "job rank " + std::to_string(job_ranks[static_cast<size_t>(member)]);
}

Status SlotGroup::gave_up_or_died(int member, uint32_t idle) const {
  const Region::Abandoned& abandoned = slot_of(member).abandoned;
  if (const uint64_t call = Region::load(abandoned.call)) {
    const auto code = static_cast<Code>(Region::load(abandoned.code));
    return Status(code, who(member) + " gave up on its call " + std::to_string(call) + " (" +
                            code_name(code) + ": " + why_given_up(abandoned) +
                            "), so this communicator cannot be used any more");
  }
  if (idle % kPollsPerLivenessCheck != 0 ||
      region->alive(local_ranks[static_cast<size_t>(member)])) {
    return {};
  }
  return Status(Code::peer_failed,
                who(member) + " (pid " + std::to_string(pid_of(member)) + ") has exited");
}

Status SlotGroup::read_from(int member, uint64_t address, std::byte* into, size_t bytes,
                            const char* what) const {
  if (const int error = transport::shm::read_process_memory(pid_of(member), address, into, bytes)) {
    if (error == ESRCH) {
      return Status(Code::peer_failed, std::string(what) + ": " + who(member) + " (pid " +
                                           std::to_string(pid_of(member)) + ") has exited");
    }
    return Status(
        Code::system_error,
        std::string(what) + ": reading " + who(member) +
            "'s buffer (process_vm_readv) failed: " + std::strerror(error) +
            (error == EPERM ? " (the kernel forbids it here: set IBCOLL_SHM_SINGLE_COPY=0)" : ""));
  }
  if (const Region::Abandoned& abandoned = slot_of(member).abandoned;
      Region::load(abandoned.call) != 0) {
    return Status(Code::peer_failed, std::string(what) + ": " + who(member) +
                                         " gave up on the call while its buffer was read (" +
                                         why_given_up(abandoned) + ")");
  }
  return {};
}

bool StagingWait::reached(const SlotGroup& slots, int members, Count field, uint64_t value,
                          Status& trouble) {
  for (; next < members; ++next) {
    if (Region::load(slots.slot_of(next).staging.*field) >= value) continue;
    trouble = slots.trouble(next, ++idle);
    return false;
  }
  next = 0;
  return true;
}

void SlotGroup::abandon(int me, uint64_t sequence, const Status& why) {
  if (!failure.ok()) return;
  failure = Status(why.code(), "communicator " + std::to_string(id) +
                                   " failed in an earlier call (" + why.message() +
                                   "); its node-local turns are lost, so every call on it fails: "
                                   "free it");
  Region::Abandoned& mine = slot_of(me).abandoned;
  // Cut at a space, marked, if it must be: a rank number cut short would name another rank.
  std::string cause = cause_passed_on.empty() ? why.message() : cause_passed_on;
  if (cause.size() >= sizeof mine.why) {
    const size_t space = cause.rfind(' ', sizeof mine.why - 5);
    cause = cause.substr(0, space == std::string::npos ? 0 : space) + " ...";
  }
  std::memcpy(mine.why, cause.data(), cause.size());
  mine.why[cause.size()] = '\0';
  Region::store(mine.code, static_cast<uint64_t>(why.code()));
  Region::store(mine.call, sequence);
}

}  // namespace ibcoll::collectives
