// SlotBinding: one rank's hold on the slot set of a communicator, through the node's directory
// (SlotRegion::Directory). The communicator's members on the node share its entry: the first
// to bind decides, under the directory's lock, between a free set (cleared for it) and none
// (every set is held, or the node's shared memory has no room for a cold one); the others take
// what it decided, so all members agree without a message. When every member has let go (or, of
// up to 64 members, every one that has not is dead: survivors free a communicator of the dead
// one), the entry is free again and the set stays warm for the next communicator, or gives its
// pages back to the kernel when SlotRegion::kWarmSets freed sets are warm already. A rank that
// dies holding the lock loses it to the next that finds it dead.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "transport/shm/slot_region.h"

namespace ibcoll::transport::shm {

class SlotBinding {
 public:
  SlotBinding() = default;  // holds nothing
  // Binds communicator `id` of `stamp`, whose members on this node are `members` (local ranks,
  // in order), for this process (`local_rank`). Error(system_error) when every entry of the
  // directory is taken (more communicators live on the node than it lists).
  SlotBinding(const SlotRegion& region, uint32_t id, uint64_t stamp, std::span<const int> members,
              int local_rank);
  SlotBinding(SlotBinding&& other) noexcept;
  SlotBinding& operator=(SlotBinding&& other) noexcept;
  SlotBinding(const SlotBinding&) = delete;
  SlotBinding& operator=(const SlotBinding&) = delete;
  ~SlotBinding();

  // The set the communicator uses, or SlotRegion::kNoSet.
  int set() const { return set_; }
  // Without a set because the node's shared memory had no room for one (not all held).
  bool lacked_room() const { return lacked_room_; }
  // Lets go, and no member of the node that has not bound yet ever will (the communicator was
  // given up before all its members made it): the entry is free once those that did let go.
  void abandon() noexcept { release(true); }

 private:
  void release(bool no_more_binders = false) noexcept;
  // Whether every member that has not let go of `entry` is dead.
  bool only_the_dead_hold(const SlotRegion::Directory::Entry& entry) const;

  const SlotRegion* region_ = nullptr;
  int entry_ = -1;
  int set_ = SlotRegion::kNoSet;
  bool lacked_room_ = false;
  int local_rank_ = 0;
  std::vector<int> members_;  // local ranks, in order
};

}  // namespace ibcoll::transport::shm
