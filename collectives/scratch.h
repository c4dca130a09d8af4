// Scratch: a task's working buffer for incoming data, left uninitialised (a std::vector would
// zero it first, which for large messages costs as much as the copy it makes room for), from
// the call memory (call_memory.h), so that calls in a row reuse it.
#pragma once

#include <cstddef>

#include "collectives/call_memory.h"

namespace ibcoll::collectives {

class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() { release(); }

  // Replaces the buffer with one of `bytes`.
  void allocate(size_t bytes) {
    release();
    bytes_ = static_cast<std::byte*>(CallMemory::take(bytes));
    size_ = bytes;
  }
  std::byte* data() const { return bytes_; }
  size_t size() const { return size_; }

 private:
  void release() {
    CallMemory::give(bytes_, size_);
    bytes_ = nullptr;
    size_ = 0;
  }

  std::byte* bytes_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ibcoll::collectives
