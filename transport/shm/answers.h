// Answers: where a receiver tells a sender what became of its rendezvous (read, or refused by
// the kernel), one table per ordered pair of ranks in the segment. The receiver writes straight
// into the sender's entry, so a sender never waits on its receiver making progress again after
// the read: a rank whose receive is done may go off and compute for an hour.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ibcoll::transport::shm {

class Answers {
 public:
  static constexpr uint64_t kEntries = 64;  // rendezvous a sender may have unanswered per peer
  static constexpr size_t kBytes = kEntries * sizeof(uint64_t);
  enum Answer : uint64_t { pending = 0, done = 1, refused = 2 };

  explicit Answers(std::byte* base) : base_(base) {}

  // Sender: marks rendezvous `id` unanswered, before announcing it (entry id mod kEntries must
  // not hold an unanswered one).
  void open(uint64_t id) const { entry(id).store(id << 2 | pending, std::memory_order_relaxed); }
  Answer answer_to(uint64_t id) const {
    const uint64_t value = entry(id).load(std::memory_order_acquire);
    return value >> 2 == id ? static_cast<Answer>(value & 3) : pending;
  }

  // Receiver: after the read (or the failed attempt).
  void answer(uint64_t id, Answer answer) const {
    entry(id).store(id << 2 | answer, std::memory_order_release);
  }

 private:
  std::atomic_ref<uint64_t> entry(uint64_t id) const {
    return std::atomic_ref<uint64_t>(
        *reinterpret_cast<uint64_t*>(base_ + (id % kEntries) * sizeof(uint64_t)));
  }

  std::byte* base_;
};

}  // namespace ibcoll::transport::shm
