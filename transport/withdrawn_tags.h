// WithdrawnTags: the tag ranges of the latest calls this rank gave up (Channel::cancel), so
// that what peers still send for them is dropped as it arrives rather than kept as an early
// arrival for a receive that will never be posted (tags are not used again once a call ends).
// A peer sends a call's messages within a call's time of its start, so the latest ranges are
// enough; something sent for an older one is kept as before, until the channel ends.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace ibcoll::transport {

class WithdrawnTags {
 public:
  static constexpr size_t kRemembered = 64;

  void add(uint64_t first, uint64_t last) {
    ranges_[next_] = {first, last};
    next_ = (next_ + 1) % kRemembered;
    if (count_ < kRemembered) ++count_;
  }
  bool contains(uint64_t tag) const {
    for (size_t i = 0; i < count_; ++i) {
      if (tag >= ranges_[i].first && tag <= ranges_[i].last) return true;
    }
    return false;
  }

 private:
  struct Range {
    uint64_t first, last;
  };
  std::array<Range, kRemembered> ranges_{};
  size_t next_ = 0, count_ = 0;
};

}  // namespace ibcoll::transport
