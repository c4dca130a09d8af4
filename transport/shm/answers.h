// Answers: where a receiver tells a sender what became of its rendezvous (read, or refused by
// the kernel), one table per ordered pair of ranks in the segment. The receiver writes straight
// into the sender's entry, so a sender never waits on its receiver making progress again after
// the read: a rank whose receive is done may go off and compute for an hour.
// The entry is also where the two agree on who has the sender's memory: the receiver claims
// it (pending -> reading) before it reads, and a sender that gives the message up withdraws it
// (pending -> withdrawn) before its caller takes the buffer back; only one of them wins. A
// receiver that will never read it declines it the same way.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace ibcoll::transport::shm {

class Answers {
 public:
  static constexpr uint64_t kEntries = 64;  // rendezvous a sender may have unanswered per peer
  static constexpr size_t kBytes = kEntries * sizeof(uint64_t);
  enum Answer : uint64_t { pending = 0, done = 1, refused = 2, reading = 3, withdrawn = 4 };

  explicit Answers(std::byte* base) : base_(base) {}

  // Sender: marks rendezvous `id` unanswered, before announcing it (entry id mod kEntries must
  // not hold an unanswered one).
  void open(uint64_t id) const { entry(id).store(value(id, pending), std::memory_order_relaxed); }
  Answer answer_to(uint64_t id) const {
    const uint64_t v = entry(id).load(std::memory_order_acquire);
    return v >> kStateBits == id ? static_cast<Answer>(v & kStateMask) : pending;
  }
  // Sender, giving the message up: withdrawn, unless the receiver has claimed it (then the
  // answer as it stands: reading, done or refused).
  Answer withdraw(uint64_t id) const { return change(id, pending, withdrawn); }
  // Receiver: takes the sender's memory for reading; false if the sender withdrew it.
  bool claim(uint64_t id) const { return change(id, pending, reading) == reading; }
  // Sender, giving up on a receiver that has been reading too long (stopped, or a pid that
  // now names another process): withdrawn, unless the receiver answered meanwhile (then that
  // answer). The receiver's late answer then fails, and it drops what it read.
  Answer abandon(uint64_t id) const { return change(id, reading, withdrawn); }
  // Receiver, for a message it will never read (its receive was withdrawn): withdrawn, unless
  // the sender withdrew it first. The sender's send then fails.
  void decline(uint64_t id) const { change(id, pending, withdrawn); }
  // Receiver: after the read (or the failed attempt); false if the sender abandoned it
  // meanwhile, so what was read may not be the message.
  bool answer(uint64_t id, Answer answer) const { return change(id, reading, answer) == answer; }

 private:
  static constexpr int kStateBits = 3;
  static constexpr uint64_t kStateMask = (1u << kStateBits) - 1;
  static uint64_t value(uint64_t id, Answer answer) { return id << kStateBits | answer; }
  // `to` if the entry held `from` for `id`, else what it holds (for `id`: an entry reused for
  // a later id is left alone).
  Answer change(uint64_t id, Answer from, Answer to) const {
    uint64_t expected = value(id, from);
    if (entry(id).compare_exchange_strong(expected, value(id, to), std::memory_order_acq_rel)) {
      return to;
    }
    return expected >> kStateBits == id ? static_cast<Answer>(expected & kStateMask) : pending;
  }
  std::atomic_ref<uint64_t> entry(uint64_t id) const {
    return std::atomic_ref<uint64_t>(
        *reinterpret_cast<uint64_t*>(base_ + (id % kEntries) * sizeof(uint64_t)));
  }

  std::byte* base_;
};

}  // namespace ibcoll::transport::shm
