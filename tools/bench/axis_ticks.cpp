#include "tools/bench/axis_ticks.h"

#include <cmath>

namespace ibcoll::bench {

std::vector<double> axis_ticks(double low, double high, bool log) {
  std::vector<double> ticks;
  if (log) {
    const int first = static_cast<int>(std::floor(std::log10(low) + 1e-9));
    const int last = std::max(first + 1, static_cast<int>(std::ceil(std::log10(high) - 1e-9)));
    const bool with_steps = last - first <= 2;
    for (int decade = first; decade <= last; ++decade) {
      const double base = std::pow(10.0, decade);
      ticks.push_back(base);
      if (with_steps && decade < last) {
        ticks.push_back(2 * base);
        ticks.push_back(5 * base);
      }
    }
    return ticks;
  }
  const double span = high > low ? high - low : 1.0;
  const double magnitude = std::pow(10.0, std::floor(std::log10(span / 5)));
  double step = magnitude;
  for (double factor : {1.0, 2.0, 5.0, 10.0}) {
    step = factor * magnitude;
    if (span / step <= 6) break;
  }
  // Each tick a whole number of steps (not a running sum, whose rounding would show).
  for (double k = std::floor(low / step); ticks.empty() || ticks.back() < high - step * 1e-9; ++k)
    ticks.push_back(k * step);
  return ticks;
}

}  // namespace ibcoll::bench
