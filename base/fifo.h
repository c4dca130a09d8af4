// Fifo: a first-in first-out queue that keeps its storage, for the queues a message passes
// through (posted receives, early arrivals, sends waiting for room). A std::deque frees a block
// each time its front crosses one and takes a new one at its back, so a steady stream of
// messages allocates all the time; this one allocates only when it holds more than ever
// before. Its first push makes room for a few, the depth most queues never pass (a queue never
// used takes no memory: a process has one per peer). Removing from the middle is allowed (a
// match is almost always at the front).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace ibcoll {

template <typename T>
class Fifo {
 public:
  using iterator = typename std::vector<T>::iterator;

  Fifo() = default;
  Fifo(Fifo&& other) noexcept
      : items_(std::move(other.items_)), head_(std::exchange(other.head_, 0)) {
    other.items_.clear();
  }
  Fifo& operator=(Fifo&& other) noexcept {
    items_ = std::move(other.items_);
    head_ = std::exchange(other.head_, 0);
    other.items_.clear();
    return *this;
  }

  bool empty() const { return head_ == items_.size(); }
  size_t size() const { return items_.size() - head_; }
  T& front() { return items_[head_]; }
  const T& back() const { return items_.back(); }
  iterator begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  iterator end() { return items_.end(); }
  auto begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
  auto end() const { return items_.end(); }

  void push_back(T item) {
    if (items_.capacity() == 0) items_.reserve(kFirstCapacity);
    if (empty()) {
      clear();
    } else if (head_ >= kCompactFrom && head_ * 2 >= items_.size()) {
      // Never empty for long: move the live items down instead of growing for ever.
      items_.erase(items_.begin(), begin());
      head_ = 0;
    }
    items_.push_back(std::move(item));
  }
  void pop_front() {
    [[maybe_unused]] T gone = std::move(items_[head_++]);  // its resources go now, not later
    if (empty()) clear();
  }
  // Removes `at`; the position after it.
  iterator erase(iterator at) {
    if (at == begin()) {
      pop_front();
      return begin();
    }
    return items_.erase(at);
  }
  void clear() {
    items_.clear();
    head_ = 0;
  }

 private:
  static constexpr size_t kFirstCapacity = 8;
  static constexpr size_t kCompactFrom = 64;
  std::vector<T> items_;
  size_t head_ = 0;  // items_[0, head_) were taken out
};

}  // namespace ibcoll
