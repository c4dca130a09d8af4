#include "collectives/bcast/scatter_allgather.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <vector>

#include "collectives/partition.h"

namespace ibcoll::collectives {
namespace {

constexpr uint32_t kScatterStep = 0, kChainStep = 1;
constexpr size_t kNone = std::numeric_limits<size_t>::max();

// Positions are relative to the root (root = 0); piece q belongs to position q. In the binomial
// scatter, position q > 0 gets pieces [q, q + lowest bit of q) from q minus that bit, and hands
// each child q + m (m = its bit / 2, / 4, ..., 1) the pieces [q + m, q + 2m). Then at chain
// step t, position q sends piece q - t to q + 1, unless q + 1 holds it from the scatter; the
// last position sends nothing (to the root).
class ScatterAllgather final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    n_ = static_cast<size_t>(group_.size());
    data_ = static_cast<std::byte*>(args_.recv);
    position_ = (static_cast<size_t>(group_.rank) + n_ - static_cast<size_t>(args_.root)) % n_;
    if (n_ == 1 || args_.count == 0) return;
    if (position_ == 0) {
      scatter_to_children();
    } else {
      scatter_recv_ = recv_from(member(position_ - subtree_bit(position_)), kScatterStep,
                                at(position_), span_bytes(position_, held_end(position_)));
    }
    // Chain step t brings piece position - 1 - t from the one before, unless we hold it.
    chain_recv_.assign(n_ - 1, kNone);
    for (size_t t = 0; position_ != 0 && t + 1 < n_; ++t) {
      const size_t p = piece(position_ + n_ - 1 - t);
      if (!holds(position_, p)) {
        chain_recv_[t] = recv_from(member(position_ - 1), kChainStep, at(p), bytes(p));
      }
    }
  }

  State advance() override {
    if (failed()) return step_done() ? State::failed : State::running;
    if (n_ == 1 || args_.count == 0) return State::done;
    const bool scattered = position_ == 0 || completed(scatter_recv_);
    if (scattered && !forwarded_) scatter_to_children();
    // Chain step t sends piece position - t: held from the scatter, or brought by step t - 1.
    while (scattered && position_ + 1 < n_ && next_send_ + 1 < n_) {
      const size_t t = next_send_;
      const size_t p = piece(position_ + n_ - t);
      if (!holds(position_, p) && !completed(chain_recv_[t - 1])) break;
      if (!holds(position_ + 1, p)) send_to(member(position_ + 1), kChainStep, at(p), bytes(p));
      ++next_send_;
    }
    const bool sent_all = position_ + 1 >= n_ || next_send_ + 1 >= n_;
    return scattered && forwarded_ && sent_all && step_done() ? State::done : State::running;
  }

 private:
  // The scatter subtree of position q > 0 spans its lowest set bit; the root's spans all.
  static size_t subtree_bit(size_t q) { return q & (~q + 1); }
  size_t held_end(size_t q) const { return q == 0 ? n_ : std::min(n_, q + subtree_bit(q)); }
  bool holds(size_t q, size_t p) const { return p >= q && p < held_end(q); }

  void scatter_to_children() {
    forwarded_ = true;
    const size_t top = position_ == 0 ? std::bit_ceil(n_) : subtree_bit(position_);
    for (size_t m = top / 2; m >= 1; m /= 2) {
      const size_t child = position_ + m;
      if (child >= n_) continue;
      send_to(member(child), kScatterStep, at(child), span_bytes(child, std::min(n_, child + m)));
    }
  }

  size_t piece(size_t q) const { return q % n_; }
  int member(size_t position) const {
    return static_cast<int>((position + static_cast<size_t>(args_.root)) % n_);
  }
  std::byte* at(size_t q) const {
    return data_ + part(args_.count, n_, q).begin * type_size(args_.type);
  }
  size_t bytes(size_t q) const { return part(args_.count, n_, q).count * type_size(args_.type); }
  // Pieces [first, end) lie one after the other.
  size_t span_bytes(size_t first, size_t end) const {
    return (part(args_.count, n_, end - 1).end() - part(args_.count, n_, first).begin) *
           type_size(args_.type);
  }

  size_t n_ = 1, position_ = 0;
  std::byte* data_ = nullptr;
  size_t scatter_recv_ = 0;
  bool forwarded_ = false;          // our scatter children have their pieces
  std::vector<size_t> chain_recv_;  // by chain step: the message, or kNone if we held it
  size_t next_send_ = 0;            // chain step whose send is next
};

}  // namespace

std::unique_ptr<CollectiveTask> make_scatter_allgather_bcast(Group group, CollectiveArgs args,
                                                             uint64_t base_tag) {
  return std::make_unique<ScatterAllgather>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
