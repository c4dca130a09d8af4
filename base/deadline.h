// Deadline: every wait in ibcoll carries one, so nothing can block forever.
#pragma once

#include <chrono>

namespace ibcoll {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  explicit Deadline(std::chrono::nanoseconds budget) : at_(Clock::now() + budget) {}
  static Deadline at(Clock::time_point when) { return Deadline(when); }

  bool expired() const { return Clock::now() >= at_; }
  Clock::time_point when() const { return at_; }
  std::chrono::milliseconds remaining() const {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(at_ - Clock::now());
    return left.count() > 0 ? left : std::chrono::milliseconds(0);
  }

 private:
  explicit Deadline(Clock::time_point when) : at_(when) {}
  Clock::time_point at_;
};

}  // namespace ibcoll
