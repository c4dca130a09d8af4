// The benchmark plot's axes tick where plotting libraries would: log axes at decades (with 2
// and 5 steps when short), linear ones at 1/2/5 steps; it used to tick at 0.1, 1.78, 31.6, 562.
#include <gtest/gtest.h>

#include "tools/bench/axis_ticks.h"

namespace ibcoll::bench {
namespace {

using Ticks = std::vector<double>;

TEST(AxisTicks, LogAxesTickAtDecades) {
  EXPECT_EQ(axis_ticks(0.13, 562, true), (Ticks{0.1, 1, 10, 100, 1000}));
  EXPECT_EQ(axis_ticks(1e-3, 1e5, true), (Ticks{1e-3, 1e-2, 0.1, 1, 10, 100, 1000, 1e4, 1e5}));
}

TEST(AxisTicks, ShortLogAxesAddTwoAndFiveSteps) {
  EXPECT_EQ(axis_ticks(3, 70, true), (Ticks{1, 2, 5, 10, 20, 50, 100}));
  EXPECT_EQ(axis_ticks(0.2, 0.9, true), (Ticks{0.1, 0.2, 0.5, 1}));
}

TEST(AxisTicks, LinearAxesStepByOneTwoOrFive) {
  EXPECT_EQ(axis_ticks(0, 7.3, false), (Ticks{0, 2, 4, 6, 8}));
  EXPECT_EQ(axis_ticks(0, 0.042, false), (Ticks{0, 0.01, 0.02, 0.03, 0.04, 0.05}));
  EXPECT_EQ(axis_ticks(0, 100, false), (Ticks{0, 20, 40, 60, 80, 100}));
}

}  // namespace
}  // namespace ibcoll::bench
