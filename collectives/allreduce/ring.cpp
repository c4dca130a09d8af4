#include "collectives/allreduce/ring.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/partition.h"
#include "collectives/reduce_kernels.h"
#include "collectives/scratch.h"

namespace ibcoll::collectives {
namespace {

constexpr size_t kSegmentBytes = 128 << 10;
constexpr uint32_t kReduceScatterStep = 0, kAllgatherStep = 1;

// Member r holds chunk c's sum at the end of the reduce-scatter when c == r + 1 (mod p). At
// reduce-scatter step s it sends chunk r - s and receives chunk r - s - 1, which it sends on at
// step s + 1; at allgather step t it sends chunk r + 1 - t and receives chunk r - t. Messages
// of one phase go out, and are received, in (step, segment) order, so a single tag per phase
// matches them (first-come first-served per sender and tag). Chunk c is reduced in ring order
// starting at member c, on every run.
class RingAllreduce final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    const size_t element = type_size(args_.type);
    result_ = static_cast<std::byte*>(args_.recv);
    if (args_.send != args_.recv && args_.count > 0) {
      std::memcpy(result_, args_.send, args_.count * element);
    }
    n_ = static_cast<size_t>(group_.size());
    if (n_ == 1 || args_.count == 0) return;
    const size_t largest_chunk = part(args_.count, n_, 0).count;
    segments_ = std::max<size_t>(1, (largest_chunk * element + kSegmentBytes - 1) / kSegmentBytes);
    incoming_.allocate(2 * largest_chunk * element);
    steps_ = n_ - 1;
    // Receives for the first two reduce-scatter steps (two staging halves), and every
    // allgather receive (straight into place).
    for (size_t s = 0; s < std::min<size_t>(2, steps_); ++s)
      post_reduce_scatter_recv(s);
    for (size_t t = 0; t < steps_; ++t) {
      for (size_t j = 0; j < segments_; ++j) {
        const Span seg = segment(allgather_chunk_received(t), j);
        allgather_recvs_.push_back(recv_from(previous(), kAllgatherStep, at(seg), bytes(seg)));
      }
    }
    for (size_t j = 0; j < segments_; ++j) {
      const Span seg = segment(chunk_sent(0), j);
      send_to(next(), kReduceScatterStep, at(seg), bytes(seg));
    }
  }

  State advance() override {
    if (failed()) return step_done() ? State::failed : State::running;
    if (n_ == 1 || args_.count == 0) return State::done;
    while (rs_cursor_ < rs_recvs_.size() && completed(rs_recvs_[rs_cursor_])) {
      const size_t s = rs_cursor_ / segments_, j = rs_cursor_ % segments_;
      const Span seg = segment(chunk_received(s), j);
      reduce(at(seg), staging(s, j, seg), seg.count, args_.type, args_.op);
      if (s + 2 < steps_ && j == segments_ - 1) post_reduce_scatter_recv(s + 2);
      // The reduced segment moves on: to the next reduce-scatter step, or, after the last,
      // it is final and starts the allgather.
      send_to(next(), s + 1 < steps_ ? kReduceScatterStep : kAllgatherStep, at(seg), bytes(seg));
      ++rs_cursor_;
    }
    // Allgather sends must leave in (step, segment) order too: step 0's come from the end of
    // the reduce-scatter, so forwarding starts only once that is over (a fast neighbour's
    // pieces may arrive before it is).
    while (rs_cursor_ == steps_ * segments_ && ag_cursor_ < allgather_recvs_.size() &&
           completed(allgather_recvs_[ag_cursor_])) {
      const size_t t = ag_cursor_ / segments_, j = ag_cursor_ % segments_;
      if (t + 1 < steps_) {
        const Span seg = segment(allgather_chunk_received(t), j);
        send_to(next(), kAllgatherStep, at(seg), bytes(seg));
      }
      ++ag_cursor_;
    }
    const bool all_posted =
        rs_cursor_ == steps_ * segments_ && ag_cursor_ == allgather_recvs_.size();
    return all_posted && step_done() ? State::done : State::running;
  }

 private:
  int next() const { return static_cast<int>((static_cast<size_t>(group_.rank) + 1) % n_); }
  int previous() const {
    return static_cast<int>((static_cast<size_t>(group_.rank) + n_ - 1) % n_);
  }
  size_t me() const { return static_cast<size_t>(group_.rank); }
  // Reduce-scatter step s: the chunk sent, and the chunk received (and reduced).
  size_t chunk_sent(size_t s) const { return (me() + n_ - s % n_) % n_; }
  size_t chunk_received(size_t s) const { return (me() + 2 * n_ - s % n_ - 1) % n_; }
  // Allgather step t receives chunk r - t (and sends it on at step t + 1).
  size_t allgather_chunk_received(size_t t) const { return chunk_sent(t); }
  Span segment(size_t chunk, size_t j) const {
    const Span c = part(args_.count, n_, chunk);
    const Span s = part(c.count, segments_, j);
    return {c.begin + s.begin, s.count};
  }
  std::byte* at(const Span& s) const { return result_ + s.begin * type_size(args_.type); }
  size_t bytes(const Span& s) const { return s.count * type_size(args_.type); }
  // Reduce-scatter step s stages its segments in half s % 2 of incoming_, at the segment's
  // offset within its chunk.
  std::byte* staging(size_t s, size_t j, const Span&) {
    const size_t element = type_size(args_.type);
    const size_t half = incoming_.size() / 2;
    const Span within = part(part(args_.count, n_, chunk_received(s)).count, segments_, j);
    return incoming_.data() + (s % 2) * half + within.begin * element;
  }
  void post_reduce_scatter_recv(size_t s) {
    for (size_t j = 0; j < segments_; ++j) {
      const Span seg = segment(chunk_received(s), j);
      rs_recvs_.push_back(
          recv_from(previous(), kReduceScatterStep, staging(s, j, seg), bytes(seg)));
    }
  }

  std::byte* result_ = nullptr;
  size_t n_ = 1, steps_ = 0, segments_ = 1;
  Scratch incoming_;
  std::vector<size_t> rs_recvs_, allgather_recvs_;
  size_t rs_cursor_ = 0, ag_cursor_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_ring_allreduce(Group group, CollectiveArgs args,
                                                    uint64_t base_tag) {
  return std::make_unique<RingAllreduce>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
