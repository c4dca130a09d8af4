// The selection table where it depends on the node's single-copy window: bcasts inside a node
// read the root's buffer (through the slots, else by messages) for sizes the window takes, and
// from 4 ranks above it too; without a window they never do. Node-local allreduces hand over
// from the slots to staged, and from staged to reading each other's slices where the node's
// single copy works, at the node's measured thresholds.
#include <gtest/gtest.h>

#include <string>

#include "collectives/select.h"

namespace ibcoll::collectives {
namespace {

using transport::shm::SingleCopySizes;

std::string bcast(size_t bytes, int ranks, bool slots, SingleCopySizes window) {
  return select_algorithm(Collective::bcast, bytes, {ranks, slots, 1, true, window, {}}, "").name;
}

std::string allreduce(size_t bytes, int ranks, bool slots, SingleCopySizes window,
                      NodeTuning tuning = {}) {
  return select_algorithm(Collective::allreduce, bytes, {ranks, slots, 1, true, window, tuning}, "")
      .name;
}

constexpr size_t k8K = 8 << 10, k64K = 64 << 10, k512K = 512 << 10, k1M = 1 << 20, k4M = 4 << 20;
const SingleCopySizes kWindow{16 << 10, 2 << 20};

TEST(Select, BcastsReadTheRootsBufferForSizesTheWindowTakes) {
  EXPECT_EQ(bcast(k8K, 2, true, kWindow), "slots");  // below the window
  EXPECT_EQ(bcast(k64K, 2, true, kWindow), "single_copy");
  EXPECT_EQ(bcast(k64K, 8, true, kWindow), "single_copy");
  EXPECT_EQ(bcast(k64K, 2, false, kWindow), "binomial");  // by messages, 2 ranks: the same
  EXPECT_EQ(bcast(k64K, 3, false, kWindow), "direct");
}

TEST(Select, AboveTheWindowFromFourRanksOnly) {
  EXPECT_EQ(bcast(k4M, 2, true, kWindow), "binomial");
  EXPECT_EQ(bcast(k4M, 3, true, kWindow), "scatter_allgather");
  EXPECT_EQ(bcast(k4M, 4, true, kWindow), "single_copy");
  EXPECT_EQ(bcast(k4M, 3, false, kWindow), "scatter_allgather");
  EXPECT_EQ(bcast(k4M, 4, false, kWindow), "direct");
}

TEST(Select, NoWindowNoReading) {
  for (int ranks : {2, 3, 4, 8}) {
    for (bool slots : {true, false}) {
      for (size_t bytes : {k64K, k4M}) {
        const std::string chosen = bcast(bytes, ranks, slots, {});
        EXPECT_TRUE(chosen != "single_copy" && chosen != "direct") << chosen;
      }
    }
  }
}

TEST(Select, LargeAllreducesReadEachOthersSlicesFromTheNodesThreshold) {
  EXPECT_EQ(allreduce(k512K, 2, true, kWindow), "staged");
  EXPECT_EQ(allreduce(k1M, 2, true, kWindow), "single_copy");  // above the window too
  EXPECT_EQ(allreduce(k4M, 4, true, kWindow), "single_copy");
  EXPECT_EQ(allreduce(k4M, 2, true, {}), "staged");  // no single copy
  EXPECT_EQ(allreduce(k4M, 2, false, kWindow), "rabenseifner");
  const NodeTuning from_512K{.single_copy_allreduce_from = k512K};
  EXPECT_EQ(allreduce(k512K - 1, 2, true, kWindow, from_512K), "staged");
  EXPECT_EQ(allreduce(k512K, 2, true, kWindow, from_512K), "single_copy");
  const NodeTuning never{.single_copy_allreduce_from = 0};
  EXPECT_EQ(allreduce(k4M, 2, true, kWindow, never), "staged");
}

TEST(Select, SmallAllreducesRunInTheSlotsUpToTheNodesThreshold) {
  EXPECT_EQ(allreduce(2 << 10, 2, true, kWindow), "slots");  // unmeasured: 2 KiB
  EXPECT_EQ(allreduce((2 << 10) + 1, 2, true, kWindow), "staged");
  const NodeTuning to_8K{.slots_allreduce_max = k8K};
  EXPECT_EQ(allreduce(k8K, 4, true, kWindow, to_8K), "slots");
  EXPECT_EQ(allreduce(k8K + 4, 4, true, kWindow, to_8K), "staged");
  EXPECT_EQ(allreduce(k8K, 4, false, kWindow, to_8K), "recursive_doubling");  // no slots
}

// The thresholds from measured times (tuning.h), as the node's calibration takes them: the
// handover that makes the summed relative time least, so one slow point does not decide.
TEST(Tuning, TheSlotsKeepThePrefixOfSizesOnWhichStagedLosesMost) {
  const PairTimes times[] = {{256, 1, 2}, {512, 1, 2}, {1024, 3, 2}, {2048, 1, 2}, {4096, 2, 1}};
  EXPECT_EQ(slots_allreduce_max(times), 2048u);  // one slow point at 1K does not end it
  const PairTimes lose_first[] = {{256, 3, 2}, {512, 1, 1.1}};
  EXPECT_EQ(slots_allreduce_max(lose_first), 128u);
  const PairTimes win_all[] = {{256, 1, 2}, {32768, 1, 1}};
  EXPECT_EQ(slots_allreduce_max(win_all), 256u);  // a tie gains nothing
  EXPECT_EQ(slots_allreduce_max({}), NodeTuning{}.slots_allreduce_max);
}

TEST(Tuning, SingleCopyFromTheSuffixOnWhichItGainsMost) {
  const PairTimes times[] = {{1, 10, 12}, {2, 10, 9}, {3, 10, 11}, {4, 10, 8}, {5, 10, 9}};
  EXPECT_EQ(single_copy_allreduce_from(times), 4u);  // 4-5: -0.3; 2-5: -0.2
  const PairTimes one_outlier[] = {{1, 10, 9}, {2, 10, 10.5}, {3, 10, 9}};
  EXPECT_EQ(single_copy_allreduce_from(one_outlier), 1u);
  const PairTimes within_margin[] = {{1, 10, 9.8}, {2, 10, 9.8}};  // 2% each
  EXPECT_EQ(single_copy_allreduce_from(within_margin), 0u);
  const PairTimes lose_last[] = {{1, 10, 5}, {2, 10, 16}};
  EXPECT_EQ(single_copy_allreduce_from(lose_last), 0u);  // nothing says it wins beyond
}

}  // namespace
}  // namespace ibcoll::collectives
