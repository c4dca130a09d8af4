// Where an axis gets its ticks, as plotting libraries place them: on a log axis at every decade
// (and at 2 and 5 times each when it spans no more than two), on a linear one at steps of 1, 2
// or 5 times a power of ten, about five of them, the last at or above the highest value.
#pragma once

#include <vector>

namespace ibcoll::bench {

// Ascending tick values covering [low, high] (a log axis: both above 0).
std::vector<double> axis_ticks(double low, double high, bool log);

}  // namespace ibcoll::bench
