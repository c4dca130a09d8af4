// Scratch: a task's working buffer for incoming data, left uninitialised. A std::vector would
// zero it first, which for large messages costs as much as the copy it makes room for.
#pragma once

#include <cstddef>
#include <memory>

namespace ibcoll::collectives {

class Scratch {
 public:
  // Replaces the buffer with one of `bytes`.
  void allocate(size_t bytes) {
    bytes_ = std::make_unique_for_overwrite<std::byte[]>(bytes);
    size_ = bytes;
  }
  std::byte* data() const { return bytes_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<std::byte[]> bytes_;
  size_t size_ = 0;
};

}  // namespace ibcoll::collectives
