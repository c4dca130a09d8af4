// The communicator ids and stamps of one process. An id (2..largest; 0 is the node
// calibration's, 1 the world's) names one of this process's live communicators, and is free
// again once that is freed, so a job that makes and frees communicators without end never runs
// out. What keeps a communicator apart from an earlier one with its id is its stamp: the
// members' largest, which is past every sequence number any of them used on a communicator it
// freed (so no late message of the earlier one matches a call of the new one: its sequence
// numbers start at the stamp) and past every stamp any of them saw before (so a slot directory
// entry an earlier one still holds on some node is not taken for the new one's).
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace ibcoll::runtime {

class CommunicatorIds {
 public:
  static constexpr uint32_t kLargest = 65535;  // tags carry 16 bits of it
  static constexpr uint32_t kFirst = 2;

  // `largest`: the largest id handed out (kLargest; less in tests, IBCOLL_COMM_IDS).
  explicit CommunicatorIds(uint32_t largest);

  uint32_t largest() const { return largest_; }
  bool free(uint32_t id) const { return id >= kFirst && id <= largest_ && !held_[id]; }
  // Above every id held here (kFirst at least): the members' largest is free on every member,
  // unless it is past largest().
  uint32_t next() const { return highest_held_ + 1 < kFirst ? kFirst : highest_held_ + 1; }
  // The ids held here as a bitmap (bit i of word i / 64), for a round that finds one free on
  // every member by their bitwise OR.
  std::vector<uint64_t> held_bitmap() const;
  // The lowest id (kFirst up) whose bit is clear in `held_anywhere`, or 0 when none is.
  uint32_t lowest_clear(const std::vector<uint64_t>& held_anywhere) const;

  uint64_t stamp() const { return stamp_; }
  // The members agreed on `stamp` (or saw it chosen): this process's next one is past it.
  void see(uint64_t stamp);

  // A communicator takes `id` (free here) with the members' `stamp`. Error(invalid_argument)
  // where the id is held, or the stamp is below the sequence numbers this process's last
  // communicator with the id took (the members chose it from stamps given before that one was
  // freed: under an MPI library, agreements run beside the program's frees).
  void hold(uint32_t id, uint64_t stamp);
  // It is freed, its calls having taken sequence numbers below `next_sequence`.
  void release(uint32_t id, uint64_t next_sequence);

 private:
  uint32_t largest_;
  std::vector<bool> held_;
  // Freed ids, with the sequence number after their communicator's last call (few: an id taken
  // again leaves it).
  std::unordered_map<uint32_t, uint64_t> released_at_;
  uint32_t highest_held_ = 1;  // the world's
  uint64_t stamp_ = 2;         // the world's calls start at 1
};

}  // namespace ibcoll::runtime
