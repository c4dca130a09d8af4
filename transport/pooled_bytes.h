// PooledBytes: an uninitialised byte buffer taken from a memory resource (a channel's pool) and
// given back to it, for a message held because it arrived before its receive was posted. A
// pool keeps the blocks freed for the next messages of their size, so a steady stream of such
// messages makes no heap allocation, where a vector per message made one each.
#pragma once

#include <cstddef>
#include <memory_resource>
#include <utility>

namespace ibcoll::transport {

class PooledBytes {
 public:
  PooledBytes() = default;
  // Throws std::bad_alloc when the resource has no memory for `bytes`.
  PooledBytes(std::pmr::memory_resource& from, size_t bytes)
      : from_(&from),
        data_(bytes ? static_cast<std::byte*>(from.allocate(bytes, 1)) : nullptr),
        size_(bytes) {}
  PooledBytes(PooledBytes&& other) noexcept
      : from_(other.from_),
        data_(std::exchange(other.data_, nullptr)),
        size_(std::exchange(other.size_, 0)) {}
  PooledBytes& operator=(PooledBytes&& other) noexcept {
    if (this != &other) {
      release();
      from_ = other.from_;
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  ~PooledBytes() { release(); }

  std::byte* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void release() noexcept {
    if (data_) from_->deallocate(data_, size_, 1);
    data_ = nullptr;
    size_ = 0;
  }

  std::pmr::memory_resource* from_ = nullptr;
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ibcoll::transport
