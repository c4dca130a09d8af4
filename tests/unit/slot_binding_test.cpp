// The node's slot directory (transport/shm/slot_binding.h), in one process's memory: the members
// of one communicator share an entry, and communicators with one id and one stamp (two agreements
// of different members whose stamps happened to be equal) do not; an abandoned communicator's
// entry is free once those that bound it let go, whoever never came.
#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <vector>

#include "transport/shm/slot_binding.h"

namespace ibcoll::transport::shm {
namespace {

struct Region {
  static constexpr int kLocalRanks = 3;
  Region()
      : bytes(SlotRegion::bytes(kLocalRanks)),
        memory(static_cast<std::byte*>(std::aligned_alloc(4096, bytes)), &std::free),
        region((std::fill_n(memory.get(), bytes, std::byte{0}), memory.get()), kLocalRanks, pids) {}
  size_t bytes;
  std::unique_ptr<std::byte, decltype(&std::free)> memory;
  pid_t pids[kLocalRanks] = {0, 0, 0};  // 0: not checked
  SlotRegion region;
};

TEST(SlotBinding, MembersShareAnEntryAndOthersWithTheSameIdAndStampDoNot) {
  Region r;
  const std::vector<int> zero_two = {0, 2}, zero_one = {0, 1};
  SlotBinding a0(r.region, 5, 9, zero_two, 0), a2(r.region, 5, 9, zero_two, 2);
  EXPECT_EQ(a0.set(), a2.set());
  SlotBinding b1(r.region, 5, 9, zero_one, 1);  // same id, stamp and first member
  EXPECT_NE(b1.set(), a0.set());
  SlotBinding c0(r.region, 5, 10, zero_two, 0);  // a later stamp
  EXPECT_NE(c0.set(), a0.set());
}

TEST(SlotBinding, AnAbandonedEntryIsFreeOnceItsBindersLetGo) {
  Region r;
  const std::vector<int> all = {0, 1, 2};
  int set = SlotRegion::kNoSet;
  {
    SlotBinding taker(r.region, 7, 3, all, 1);  // members 0 and 2 never bind
    set = taker.set();
    ASSERT_NE(set, SlotRegion::kNoSet);
    SlotBinding other(r.region, 8, 3, all, 1);
    EXPECT_NE(other.set(), set);  // the taker's set is held
    taker.abandon();
  }
  SlotBinding next(r.region, 9, 4, all, 0);
  EXPECT_EQ(next.set(), set) << "the abandoned entry still holds its set";
}

}  // namespace
}  // namespace ibcoll::transport::shm
