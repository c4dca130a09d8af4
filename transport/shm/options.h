// The shared-memory transport's settings (from IBCOLL_* variables, see runtime/config).
#pragma once

#include <chrono>
#include <cstddef>
#include <limits>
#include <string>

#include "base/size_text.h"

namespace ibcoll::transport::shm {

// The message sizes that are read straight from the sender (single copy): from `from` up to,
// not including, `below`; none when `from` is 0. The kernel's copy (process_vm_readv) beats the
// rings' two user-space copies only in a window that differs from machine to machine: above
// some size the rings' copies, one on each side and running at once, win again. So the runtime
// measures it at start-up (single_copy_calibration.h) unless IBCOLL_SHM_SINGLE_COPY sets it.
struct SingleCopySizes {
  static constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();
  size_t from = 0;
  size_t below = kUnbounded;
  bool holds(size_t bytes) const { return from != 0 && bytes >= from && bytes < below; }
  bool operator==(const SingleCopySizes&) const = default;
  // As IBCOLL_SHM_SINGLE_COPY writes it: "0", "64K" (and up), "64K-2M".
  std::string text() const {
    if (from == 0) return "0";
    return size_text(from) + (below == kUnbounded ? "" : "-" + size_text(below));
  }
};

struct ShmOptions {
  // How often a waiting rank checks that its peers' processes still exist.
  std::chrono::milliseconds liveness_interval{100};
  // How long a sender giving a message up waits for a receiver that is reading it straight
  // from its memory (IBCOLL_TIMEOUT).
  std::chrono::milliseconds read_wait = std::chrono::minutes(10);
  SingleCopySizes single_copy;  // none: everything through the rings
};

}  // namespace ibcoll::transport::shm
