// Ring: a single-producer single-consumer queue of fixed-size slots in shared memory, one per
// ordered pair of local ranks. The producer fills the slot at head and publishes it by moving
// head; the consumer reads the slot at tail and frees it by moving tail. Both counters only
// grow; each lives in its own cache line so the two sides do not share one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ibcoll::transport::shm {

class Ring {
 public:
  static constexpr uint32_t kSlots = 16;
  static constexpr size_t kSlotBytes = 16384;
  static constexpr size_t kBytes = 128 + kSlots * kSlotBytes;  // counters, then the slots

  explicit Ring(std::byte* base) : base_(base) {}

  // Producer side.
  std::byte* slot_to_fill() const {
    const uint64_t head = counter(0).load(std::memory_order_relaxed);
    if (head - counter(64).load(std::memory_order_acquire) == kSlots) return nullptr;
    return slot(head);
  }
  // Which of the kSlots a slot pointer of this ring is.
  uint32_t index_of(const std::byte* slot) const {
    return static_cast<uint32_t>(static_cast<size_t>(slot - base_ - 128) / kSlotBytes);
  }
  void publish() const {
    auto head = counter(0);
    head.store(head.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

  // Consumer side.
  std::byte* slot_to_read() const {
    const uint64_t tail = counter(64).load(std::memory_order_relaxed);
    if (counter(0).load(std::memory_order_acquire) == tail) return nullptr;
    return slot(tail);
  }
  void release() const {
    auto tail = counter(64);
    tail.store(tail.load(std::memory_order_relaxed) + 1, std::memory_order_release);
  }

 private:
  std::atomic_ref<uint64_t> counter(size_t offset) const {
    return std::atomic_ref<uint64_t>(*reinterpret_cast<uint64_t*>(base_ + offset));
  }
  std::byte* slot(uint64_t index) const { return base_ + 128 + (index % kSlots) * kSlotBytes; }

  std::byte* base_;
};

}  // namespace ibcoll::transport::shm
