// The selection table where it depends on the node's single-copy window: bcasts inside a node
// read the root's buffer (through the slots, else by messages) for sizes the window takes, and
// from 4 ranks above it too; without a window they never do. Large allreduces at 2 ranks read
// each other's slices where the node's single copy works.
#include <gtest/gtest.h>

#include <string>

#include "collectives/select.h"

namespace ibcoll::collectives {
namespace {

using transport::shm::SingleCopySizes;

std::string bcast(size_t bytes, int ranks, bool slots, SingleCopySizes window) {
  return select_algorithm(Collective::bcast, bytes, {ranks, slots, 1, true, window}, "").name;
}

std::string allreduce(size_t bytes, int ranks, bool slots, SingleCopySizes window) {
  return select_algorithm(Collective::allreduce, bytes, {ranks, slots, 1, true, window}, "").name;
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

TEST(Select, LargeAllreducesAtTwoRanksReadEachOthersSlices) {
  EXPECT_EQ(allreduce(k512K, 2, true, kWindow), "staged");
  EXPECT_EQ(allreduce(k1M, 2, true, kWindow), "single_copy");  // above the window too
  EXPECT_EQ(allreduce(k4M, 2, true, kWindow), "single_copy");
  EXPECT_EQ(allreduce(k4M, 3, true, kWindow), "staged");
  EXPECT_EQ(allreduce(k4M, 2, true, {}), "staged");  // no single copy
  EXPECT_EQ(allreduce(k4M, 2, false, kWindow), "rabenseifner");
}

}  // namespace
}  // namespace ibcoll::collectives
