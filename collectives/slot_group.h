// SlotGroup: a communicator's share of the node's slot region (transport/shm/slot_region.h),
// when every member is on this node: the slot set it holds while it lives (its binding), each
// member's local rank, and the sequence number of its slot calls. Communicators that share an
// id never share a member, so each local rank's slot has one writer.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "transport/shm/slot_binding.h"
#include "transport/shm/slot_region.h"

namespace ibcoll::collectives {

struct SlotGroup {
  const transport::shm::SlotRegion* region = nullptr;
  transport::shm::SlotBinding binding;  // this rank's hold on its set, given back at the end
  uint16_t id = 0;                      // the communicator's
  std::vector<int> local_ranks;         // per member
  std::vector<int> job_ranks;           // per member, for messages (members of a node group
                                        // are numbered apart from the caller's communicator)
  uint64_t next_sequence = 1;
  uint64_t released = 0;  // this rank's last call done with its buffers: calls go in order
  // Per member, the highest call seen published: a buffer known free needs no second look.
  std::vector<uint64_t> seen_ready;  // sized like local_ranks
  // Calls this rank ran ahead in (a bcast's root needs nothing from the others, a receiver its
  // root's part only) whose members' signatures it has not compared yet: the last kRunAhead at
  // most, by call % kRunAhead (call 0: none), with this rank's signature packed as in the region.
  // A later call compares each once every member has published it: at once when that call
  // waits for every member, else kRunAhead calls on, when its publication has seen them publish
  // it, and before they can publish over it (they could once this rank has published the call
  // kBuffers - kRunAhead after it). So a root runs up to kRunAhead calls ahead of its members.
  static constexpr uint64_t kRunAhead = transport::shm::SlotRegion::kBuffers / 2;
  struct Unverified {
    using Signature = std::array<uint64_t, transport::shm::SlotRegion::kSignatureWords>;
    uint64_t call = 0;
    Signature signature{};
  };
  std::array<Unverified, kRunAhead> unverified{};
  int unverified_calls = 0;  // entries with a call: none in a loop of allreduces
  void leave_unverified(uint64_t call, const Unverified::Signature& signature) {
    Unverified& u = unverified[call % kRunAhead];
    if (u.call == 0) ++unverified_calls;
    u = {call, signature};
  }
  // `call` is verified, or its mismatch has been reported already: not again later.
  void forget_unverified(uint64_t call) {
    if (Unverified& u = unverified[call % kRunAhead]; u.call == call) {
      u.call = 0;
      --unverified_calls;
    }
  }
  // Chunks that calls through the staging halves have moved so far (SlotRegion::Staging).
  uint64_t staged_chunks = 0;

  // Not ok once a call on the communicator was given up midway, here or by a member: its
  // turns are lost, so every later call fails at once with this.
  Status failure;
  // What the first member seen giving up wrote as its cause: passed on as this rank's own if it
  // gives up in turn, so that every member names the rank that died, not a chain of members
  // that gave up after it (the record holds the start of one message only).
  mutable std::string cause_passed_on;

  // A fruitless wait on a member looks now and then whether it gave up (a load of its
  // abandoned line) and, more rarely (a check reads /proc), whether its process still lives.
  static constexpr uint32_t kPollsPerAbandonCheck = 16;
  static constexpr uint32_t kPollsPerLivenessCheck = 4096;
  // `member`'s slot in the region, and its process.
  transport::shm::SlotRegion::Slot& slot_of(int member) const {
    return region->slot(binding.set(), local_ranks[static_cast<size_t>(member)]);
  }
  pid_t pid_of(int member) const { return region->pid(local_ranks[static_cast<size_t>(member)]); }
  // After `idle` fruitless looks at `member`: why waiting on it is over, or ok. Inline: most
  // looks check nothing, and a waiting rank repeats them.
  Status trouble(int member, uint32_t idle) const {
    if (idle % kPollsPerAbandonCheck != 0) return {};
    return gave_up_or_died(member, idle);
  }
  // "job rank 9": `member` in messages.
  std::string who(int member) const;
  // The cause a member that gave up wrote (kept as the first one seen: cause_passed_on).
  const std::string& why_given_up(const transport::shm::SlotRegion::Abandoned& abandoned) const;
  // trouble()'s look: whether `member` gave up on its call or (now and then) died.
  Status gave_up_or_died(int member, uint32_t idle) const;
  // Copies `bytes` at `address` in `member`'s process into `into` (single copy): ok, or why
  // not, naming `what` ("single-copy bcast"). Also not ok when the member has given up on its
  // call, since it may have reused the memory while it was read.
  Status read_from(int member, uint64_t address, std::byte* into, size_t bytes,
                   const char* what) const;
  // This rank (member `me`) gives up call `sequence` midway for `why`: marks the communicator
  // failed here and tells the members (the first time only).
  void abandon(int me, uint64_t sequence, const Status& why);
};

// A wait, look by look, for every member's count `field` in its staging area
// (SlotRegion::Staging) to reach `value`, for the algorithms that go chunk by chunk there.
struct StagingWait {
  using Count = uint64_t transport::shm::SlotRegion::Staging::*;
  // True once every member's count has (the next wait starts over); false while `next`'s has
  // not, with `trouble` set once waiting on it is over (it gave up or died).
  bool reached(const SlotGroup& slots, int members, Count field, uint64_t value, Status& trouble);

  int next = 0;  // the member looked at
  uint32_t idle = 0;
};

}  // namespace ibcoll::collectives
