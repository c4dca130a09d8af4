// SlotRegion: the part of a node's segment where small node-local collectives run without any
// message matching. It holds kSets slot sets, which communicators take while they live (the
// node's directory says which, slot_binding.h); a set has, for every local rank, a slot:
// kBuffers buffers (taken in turn, call by call) that the rank fills with its call's signature
// and data and then publishes by storing the call's sequence number in `ready`. Only the owner
// writes a slot; everyone may read it. A rank reads a call's buffers only before it publishes
// the next, so a member's `ready` of call s - kBuffers + 1 also says that it has read call
// s - kBuffers, whose buffer call s reuses: no separate "done" flag has to cross cores (how far
// ahead a rank may publish: collectives/slot_group.h, kRunAhead). The segment's file is
// sparse: a set takes memory only once a communicator uses it, and gives it back when freed
// (but for kWarmSets freed ones, kept for the next communicators).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/shm/process.h"
#include "transport/shm/segment.h"

namespace ibcoll::transport::shm {

class SlotRegion {
 public:
  static constexpr int kSets = 128;
  static constexpr int kBuffers = 8;
  static constexpr size_t kDataBytes = 32 << 10;  // per buffer
  static constexpr size_t kSignatureWords = 4;

  // One buffer: ready and the signature share the first cache line with the first data bytes,
  // so a small call's whole contribution travels in one line.
  struct alignas(64) Buffer {
    uint64_t ready;  // sequence number of the call whose contents these are
    uint64_t signature[kSignatureWords];
    std::byte data[kDataBytes];
  };
  // For large node-local calls, which pipeline chunks through two halves taken in turn. The
  // counts say how many chunks (over the communicator's life) this rank has put in, reduced
  // its share of, and finished reading the others' results of.
  static constexpr size_t kStagingHalfBytes = 128 << 10;
  struct Staging {
    alignas(64) uint64_t contributed;
    uint64_t reduced;
    uint64_t finished;
    alignas(64) std::byte halves[2][kStagingHalfBytes];
  };
  // Set once, when this rank gives up on a call midway (a deadline passed, a member died, its
  // staged chunks stopped): the call's sequence number and why (a Code, and the start of the
  // message, so that the members say which rank died, not only that one did). Members waiting
  // on this rank read it and fail at once instead of waiting out their own deadline; from then
  // on the communicator's turns are lost, and every call on it fails.
  struct Abandoned {
    alignas(64) uint64_t call;  // 0: not abandoned; stored last
    uint64_t code;
    char why[112];  // NUL-terminated
  };
  // The last call in which this rank was done with its root's buffer in a single-copy bcast
  // (read it, or found the call mismatched): the root waits for it before its buffer is its
  // caller's again.
  struct Copied {
    alignas(64) uint64_t call;
  };
  struct alignas(64) Slot {
    Abandoned abandoned;
    Copied copied;
    alignas(64) Buffer buffers[kBuffers];
    Staging staging;
  };

  // Which communicators hold which sets: an entry per communicator that some rank of the node
  // holds (a set, or none when every set was held as it came), taken and given back under
  // `lock` (the holder's local rank + 1). A communicator is its id and its first member on the
  // node (communicators that share an id share no member). The entry lasts until every member
  // on the node has let go, so a member that binds late (a root ran ahead and freed the
  // communicator) still finds what the first decided. More communicators than sets can live:
  // the later ones run without slots.
  static constexpr int kEntries = 4 * kSets;
  static constexpr int32_t kNoSet = -1;
  static constexpr int32_t kNoRoom = -2;  // in an entry: no set, for want of room in /dev/shm
  // Freed sets that keep their pages for the next communicator: making one costs a few stores
  // instead of page faults on every member (a dup-use-free loop takes the same set each time).
  // A set freed beyond these gives its pages back, so what freed sets hold stays bounded.
  static constexpr int kWarmSets = 2;
  struct Directory {
    alignas(64) uint32_t lock;
    uint8_t has_pages[kSets];  // 1: the set was used and its pages were not given back since
    // Entry e is free when id_plus_one[e] is 0. The ids lie apart from the rest so that a
    // binder's scan reads a few cache lines, not every entry. An entry is written with its id
    // last and freed with its id first, so a holder that dies midway leaves a free entry or a
    // whole one, never a half-written one that others would take.
    uint32_t id_plus_one[kEntries];
    struct Entry {
      uint32_t first_member = 0;  // local rank
      // Tell apart communicators with one id: one made after another freed it on some members
      // while others still hold it (the members' stamp, runtime/communicator_ids.h, past the
      // earlier one's); and two made at once by agreements of different members whose stamps
      // happened to be equal (the node's members, as a digest of their local ranks: a member
      // holds an id once).
      uint64_t stamp = 0;
      uint64_t members_digest = 0;
      int32_t set = kNoSet;  // kNoSet, kNoRoom: the communicator runs without slots
      uint32_t members = 0;  // on this node that will bind it
      uint32_t bound = 0;    // members that did
      uint32_t let_go = 0;   // members done with it
      // Which of the first 64 members (by their place among them) let go: when those that have
      // not are all dead, the entry is free (a dead member never lets go).
      uint64_t let_go_mask = 0;
    } entries[kEntries];
  };
  static constexpr size_t kDirectoryBytes = (sizeof(Directory) + 4095) / 4096 * 4096;

  static size_t bytes(int local_ranks) {
    return kDirectoryBytes +
           sizeof(Slot) * static_cast<size_t>(kSets) * static_cast<size_t>(local_ranks);
  }

  // `base` is 4096-byte aligned, bytes(local_ranks) long, zeroed when created; `pids` is the
  // segment's table of each local rank's process; `segment` (if any) the one it lies in, whose
  // room is looked at before a cold set is used.
  SlotRegion(std::byte* base, int local_ranks, const pid_t* pids,
             const SharedSegment* segment = nullptr)
      : base_(base), local_ranks_(local_ranks), pids_(pids), segment_(segment) {}

  Directory& directory() const { return *reinterpret_cast<Directory*>(base_); }
  Slot& slot(int set, int local_rank) const {
    return reinterpret_cast<Slot*>(base_ + kDirectoryBytes)[set * local_ranks_ + local_rank];
  }
  int local_ranks() const { return local_ranks_; }
  // Error(system_error) naming /dev/shm when it has less room than `set`'s slots. A set is not
  // given its pages ahead (512 KiB per rank, where a small call touches a page per buffer).
  void check_room(int set) const {
    if (segment_) {
      segment_->check_room(sizeof(Slot) * static_cast<size_t>(local_ranks_),
                           "slot set " + std::to_string(set));
    }
  }
  // The process of `local_rank`, and whether it can still answer (a wait checks now and then).
  pid_t pid(int local_rank) const { return pids_[local_rank]; }
  bool alive(int local_rank) const {
    return pid(local_rank) <= 0 || process_alive(pid(local_rank));
  }
  static uint64_t load(const uint64_t& word) {
    return std::atomic_ref<const uint64_t>(word).load(std::memory_order_acquire);
  }
  static void store(uint64_t& word, uint64_t value) {
    std::atomic_ref<uint64_t>(word).store(value, std::memory_order_release);
  }

 private:
  std::byte* base_;
  int local_ranks_;
  const pid_t* pids_;
  const SharedSegment* segment_;
};

}  // namespace ibcoll::transport::shm
