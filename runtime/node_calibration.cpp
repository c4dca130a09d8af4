#include "runtime/node_calibration.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <string_view>
#include <vector>

#include "base/size_text.h"

namespace ibcoll::runtime {
namespace {

using collectives::Collective;
using collectives::Communicator;
using collectives::DataType;
using collectives::PairTimes;

constexpr std::array<size_t, 8> kSmallSizes = {256,     512,     1 << 10,  2 << 10,
                                               4 << 10, 8 << 10, 16 << 10, 32 << 10};
constexpr std::array<size_t, 5> kLargeSizes = {256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20};
constexpr int kRounds = 5;             // the best of these counts; the first pays the page faults
constexpr int kSmallCalls = 16;        // timed together, where one call takes a microsecond
constexpr double kLargeBudgetMs = 20;  // no larger size once the large part has taken this

class Timer {
 public:
  // Vectors up to `largest` bytes, allocated once as a caller's would be (pages of one
  // allocation, as many huge pages as the kernel gives it).
  Timer(Context& context, Communicator& node, size_t largest)
      : context_(context),
        node_(node),
        kept_(node.policy()),
        in_(largest / sizeof(float), 1.0f),
        out_(largest / sizeof(float)) {}

  // Nanoseconds per call of `calls` float sums of `bytes` per rank by `algorithm`, in a row
  // from a common start (as one rank's time includes its wait for the others).
  double time(const char* algorithm, size_t bytes, int calls) {
    const size_t count = bytes / sizeof(float);
    node_.set_policy(kept_);
    float token = 0;
    run_allreduce(&token, &token, 1, DataType::float32, collectives::ReduceOp::max);
    collectives::Policy forced = kept_;
    forced.allreduce_algorithm = algorithm;
    node_.set_policy(forced);
    if (std::string_view(node_.choose(Collective::allreduce, count, DataType::float32).name) !=
        algorithm) {
      throw Error(Code::internal, std::string("node calibration: ") + algorithm + " cannot run " +
                                      size_text(bytes) + " here");
    }
    const auto start = Clock::now();
    for (int c = 0; c < calls; ++c)
      run_allreduce(in_.data(), out_.data(), count, DataType::float32, collectives::ReduceOp::sum);
    return std::chrono::duration<double, std::nano>(Clock::now() - start).count() / calls;
  }

  // The largest of every rank's `values`, on every rank.
  void take_slowest(std::vector<double>& values) {
    node_.set_policy(kept_);
    std::vector<double> mine = values;
    run_allreduce(mine.data(), values.data(), values.size(), DataType::float64,
                  collectives::ReduceOp::max);
  }

 private:
  void run_allreduce(const void* in, void* out, size_t count, DataType type,
                     collectives::ReduceOp op) {
    const Status s = context_.run(node_, Collective::allreduce, {in, out, count, type, op, 0});
    if (!s.ok()) throw Error(s.code(), "node calibration: " + s.message());
  }

  Context& context_;
  Communicator& node_;
  const collectives::Policy kept_;
  std::vector<float> in_, out_;
};

// Best-of-rounds times of `below` and `above` at `bytes`, the slowest rank's, as PairTimes.
template <size_t N>
std::vector<PairTimes> measure(Timer& timer, const std::array<size_t, N>& sizes, const char* below,
                               const char* above, int calls, double budget_ms = 0) {
  std::vector<PairTimes> times;
  const auto start = Clock::now();
  for (size_t bytes : sizes) {
    std::vector<double> best = {1e300, 1e300, 0};
    // Each algorithm's rounds in a row: its first pays for the caches the other left.
    for (int round = 0; round < kRounds; ++round)
      best[0] = std::min(best[0], timer.time(below, bytes, calls));
    for (int round = 0; round < kRounds; ++round)
      best[1] = std::min(best[1], timer.time(above, bytes, calls));
    best[2] = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
    timer.take_slowest(best);  // also: every rank stops at the same size
    times.push_back({bytes, best[0], best[1]});
    if (budget_ms > 0 && best[2] > budget_ms) break;
  }
  return times;
}

std::string summary_of(const std::vector<PairTimes>& times, const char* below, const char* above,
                       int ranks) {
  std::string text = "measured at start-up on the node's " + std::to_string(ranks) +
                     " ranks, us per call " + below + " / " + above + ":";
  for (const PairTimes& t : times) {
    char point[64];
    std::snprintf(point, sizeof(point), " %s %.2f / %.2f,", size_text(t.bytes).c_str(),
                  t.below_ns / 1000, t.above_ns / 1000);
    text += point;
  }
  text.pop_back();
  return text;
}

}  // namespace

std::span<const size_t> slots_calibration_sizes() {
  return kSmallSizes;
}

std::span<const size_t> single_copy_allreduce_calibration_sizes() {
  return kLargeSizes;
}

NodeCalibration calibrate_node(Context& context, Communicator& node, collectives::NodeTuning tuning,
                               bool measure_slots, bool measure_single_copy,
                               const CalibrationPretend& pretend) {
  const std::string pretended = pretended_note(pretend);
  NodeCalibration result{tuning, {}, {}};
  const bool single_copy = measure_single_copy && node.policy().single_copy.from != 0;
  Timer timer(context, node, single_copy ? kLargeSizes.back() : kSmallSizes.back());
  if (measure_slots) {
    const bool pretend_slots = pretend.slots != CalibrationPretend::Slots::measured;
    const auto times = pretend_slots ? pretended_slots_times(pretend.slots, kSmallSizes)
                                     : measure(timer, kSmallSizes, "slots", "staged", kSmallCalls);
    result.tuning.slots_allreduce_max = collectives::slots_allreduce_max(times);
    result.slots_summary = summary_of(times, "slots", "staged", node.size());
    if (pretend_slots) result.slots_summary += pretended;
  }
  if (measure_single_copy && !single_copy) result.tuning.single_copy_allreduce_from = 0;
  if (single_copy) {
    const auto outcome = pretend.allreduce_single_copy;
    const bool pretend_single_copy = outcome != CalibrationPretend::AllreduceSingleCopy::measured;
    const auto times =
        pretend_single_copy
            ? pretended_single_copy_allreduce_times(outcome, kLargeSizes)
            : measure(timer, kLargeSizes, "staged", "single_copy", 1, kLargeBudgetMs);
    result.tuning.single_copy_allreduce_from = collectives::single_copy_allreduce_from(times);
    result.single_copy_summary = summary_of(times, "staged", "single_copy", node.size());
    if (result.tuning.single_copy_allreduce_from == 0) {
      result.single_copy_summary += "; single copy loses to staged here";
    }
    if (pretend_single_copy) result.single_copy_summary += pretended;
  }
  return result;
}

}  // namespace ibcoll::runtime
