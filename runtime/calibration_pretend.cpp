#include "runtime/calibration_pretend.h"

#include <initializer_list>
#include <utility>

#include "base/status.h"

namespace ibcoll::runtime {
namespace {

constexpr const char* kName = "IBCOLL_CALIBRATION_PRETEND";

// A path that wins takes half the other's time, one that loses twice: far beyond the
// decisions' margins, so the outcome is exactly the one asked for.
constexpr double kWin = 0.5, kLoss = 2;

// A plausible time for `bytes` by the path in use: 10 GB/s after a microsecond.
double base_ns(size_t bytes) {
  return 1000 + static_cast<double>(bytes) / 10;
}

template <typename Outcome>
Outcome outcome_of(const std::string& key, const std::string& value,
                   std::initializer_list<std::pair<const char*, Outcome>> choices) {
  std::string names;
  for (const auto& [name, outcome] : choices) {
    if (value == name) return outcome;
    names += (names.empty() ? "" : "|") + std::string(name);
  }
  throw Error(Code::invalid_argument, std::string(kName) + ": '" + value +
                                          "' is not an outcome of " + key + " (" + names + ")");
}

}  // namespace

std::string pretended_note(const CalibrationPretend& pretend) {
  return std::string("; pretended by ") + kName + "=" + pretend.text;
}

CalibrationPretend parse_calibration_pretend(const std::string& text) {
  using P = CalibrationPretend;
  P pretend;
  pretend.text = text;
  for (size_t at = 0; !text.empty() && at <= text.size();) {  // "a," is "a" and "" (refused)
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const size_t equals = item.find('=');
    const std::string key = item.substr(0, equals);
    const std::string value = equals == std::string::npos ? "" : item.substr(equals + 1);
    if (key == "single_copy") {
      pretend.single_copy = outcome_of<P::SingleCopy>(key, value,
                                                      {{"wins", P::SingleCopy::wins},
                                                       {"window", P::SingleCopy::window},
                                                       {"loses", P::SingleCopy::loses},
                                                       {"refused", P::SingleCopy::refused}});
    } else if (key == "slots") {
      pretend.slots =
          outcome_of<P::Slots>(key, value, {{"early", P::Slots::early}, {"late", P::Slots::late}});
    } else if (key == "allreduce_single_copy") {
      pretend.allreduce_single_copy =
          outcome_of<P::AllreduceSingleCopy>(key, value,
                                             {{"early", P::AllreduceSingleCopy::early},
                                              {"late", P::AllreduceSingleCopy::late},
                                              {"never", P::AllreduceSingleCopy::never}});
    } else {
      throw Error(Code::invalid_argument,
                  std::string(kName) + ": '" + item +
                      "' is not KEY=OUTCOME with KEY single_copy, slots or allreduce_single_copy");
    }
    at = end + 1;
  }
  return pretend;
}

std::vector<transport::shm::CopyTimes> pretended_copy_times(CalibrationPretend::SingleCopy outcome,
                                                            std::span<const size_t> sizes) {
  std::vector<transport::shm::CopyTimes> times;
  for (size_t bytes : sizes) {
    const bool in_window = bytes >= (size_t{64} << 10) && bytes < (size_t{2} << 20);
    const bool wins = outcome == CalibrationPretend::SingleCopy::wins ||
                      (outcome == CalibrationPretend::SingleCopy::window && in_window);
    times.push_back({bytes, base_ns(bytes), base_ns(bytes) * (wins ? kWin : kLoss)});
  }
  return times;
}

std::vector<collectives::PairTimes> pretended_slots_times(CalibrationPretend::Slots outcome,
                                                          std::span<const size_t> sizes) {
  std::vector<collectives::PairTimes> times;
  const double staged = outcome == CalibrationPretend::Slots::early ? kWin : kLoss;
  for (size_t bytes : sizes)
    times.push_back({bytes, base_ns(bytes), base_ns(bytes) * staged});
  return times;
}

std::vector<collectives::PairTimes> pretended_single_copy_allreduce_times(
    CalibrationPretend::AllreduceSingleCopy outcome, std::span<const size_t> sizes) {
  using Outcome = CalibrationPretend::AllreduceSingleCopy;
  std::vector<collectives::PairTimes> times;
  for (size_t bytes : sizes) {
    const bool wins =
        outcome == Outcome::early || (outcome == Outcome::late && bytes >= (size_t{1} << 20));
    times.push_back({bytes, base_ns(bytes), base_ns(bytes) * (wins ? kWin : kLoss)});
  }
  return times;
}

}  // namespace ibcoll::runtime
