#include "collectives/tuning.h"

namespace ibcoll::collectives {
namespace {

double excess(const PairTimes& t) {  // the successor's time relative to the one before it
  return t.above_ns / t.below_ns - 1;
}

}  // namespace

size_t slots_allreduce_max(std::span<const PairTimes> times) {
  if (times.empty()) return NodeTuning{}.slots_allreduce_max;
  // Staged for the sizes after the prefix: the prefix whose sizes lose most by staged.
  size_t end = 0;
  double sum = 0, best = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    sum += excess(times[i]);  // what staged would lose at this size
    if (sum <= best) continue;
    best = sum, end = i + 1;
  }
  return end == 0 ? times.front().bytes / 2 : times[end - 1].bytes;
}

size_t single_copy_allreduce_from(std::span<const PairTimes> times) {
  constexpr double kMargin = 0.03;  // a gain within the noise would flip from run to run
  size_t from = 0;
  double sum = 0, best = 0;
  for (size_t i = times.size(); i-- > 0;) {
    sum += excess(times[i]);
    if (sum < best && sum <= -kMargin * static_cast<double>(times.size() - i)) {
      best = sum, from = times[i].bytes;
    }
  }
  return from;
}

}  // namespace ibcoll::collectives
