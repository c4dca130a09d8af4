// The single-copy sizes from measured times: from the smallest size at which single copy wins by
// the margin, up to (not including) the next size at which it does not; a tie keeps the rings.
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

TEST(SingleCopySizes, ATieOrANarrowWinKeepsTheRings) {
  EXPECT_EQ(verdict(10, 40, 160), SingleCopySizes{});
  EXPECT_EQ(verdict(9.5, 38, 150), SingleCopySizes{});           // 95%: within the noise
  EXPECT_EQ(verdict(9, 36, 144), (SingleCopySizes{k64, kAll}));  // 90%
  EXPECT_EQ(single_copy_sizes({}), SingleCopySizes{});
}

}  // namespace
}  // namespace ibcoll::transport::shm
