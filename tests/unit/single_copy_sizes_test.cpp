// The single-copy sizes from measured times: from the smallest size at which single copy wins by
// the margin, up to (not including) the next size at which the rings win by it; a tie keeps the
// path in use (the rings below the window, single copy inside it).
#include <gtest/gtest.h>

#include <vector>

#include "transport/shm/single_copy_calibration.h"

namespace ibcoll::transport::shm {
namespace {

constexpr size_t k64 = 64 << 10, k256 = 256 << 10, k1M = 1 << 20;
constexpr size_t kAll = SingleCopySizes::kUnbounded;

SingleCopySizes verdict(double single_64, double single_256, double single_1m) {
  const std::vector<CopyTimes> times = {
      {k64, 10, single_64}, {k256, 40, single_256}, {k1M, 160, single_1m}};
  return single_copy_sizes(times);
}

TEST(SingleCopySizes, FromTheFirstWinToTheNextLoss) {
  EXPECT_EQ(verdict(5, 20, 80), (SingleCopySizes{k64, kAll}));     // wins everywhere
  EXPECT_EQ(verdict(12, 30, 100), (SingleCopySizes{k256, kAll}));  // loses small, wins from 256K
  EXPECT_EQ(verdict(12, 50, 100), (SingleCopySizes{k1M, kAll}));   // wins at the largest only
  EXPECT_EQ(verdict(5, 20, 200), (SingleCopySizes{k64, k1M}));     // loses again at the largest
  EXPECT_EQ(verdict(5, 50, 80), (SingleCopySizes{k64, k256}));     // one window: the later win
  EXPECT_EQ(verdict(12, 50, 200), SingleCopySizes{});              // never wins
}

TEST(SingleCopySizes, ATieInsideTheWindowKeepsSingleCopy) {
  // Seen on a 2-core machine at 1 MiB: 92.0 us by the rings, 94.7 by single copy, where the next
  // runs measured 69 against 82-91; the window must not close on such a tie.
  EXPECT_EQ(verdict(5, 40, 165), (SingleCopySizes{k64, kAll}));
  EXPECT_EQ(verdict(5, 42, 100), (SingleCopySizes{k64, kAll}));  // rings 95% of it: still a tie
  EXPECT_EQ(verdict(5, 45, 100), (SingleCopySizes{k64, k256}));  // rings 89%: they win
}

TEST(SingleCopySizes, ATieOrANarrowWinKeepsTheRings) {
  EXPECT_EQ(verdict(10, 40, 160), SingleCopySizes{});
  EXPECT_EQ(verdict(9.5, 38, 150), SingleCopySizes{});           // 95%: within the noise
  EXPECT_EQ(verdict(9, 36, 144), (SingleCopySizes{k64, kAll}));  // 90%
  EXPECT_EQ(single_copy_sizes({}), SingleCopySizes{});
}

}  // namespace
}  // namespace ibcoll::transport::shm
