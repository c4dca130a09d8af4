#include "collectives/bcast/scatter_allgather.h"

#include <vector>

#include "collectives/partition.h"

namespace ibcoll::collectives {
namespace {

constexpr uint32_t kScatterStep = 0, kRingStep = 1;

// Positions are relative to the root (root = 0). Piece q belongs to position q. At ring step t,
// position q sends piece q - t to q + 1 and receives piece q - t - 1 from q - 1; the root only
// sends, and the last position sends nothing to the root.
class ScatterAllgather final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    n_ = static_cast<size_t>(group_.size());
    data_ = static_cast<std::byte*>(args_.recv);
    position_ = (static_cast<size_t>(group_.rank) + n_ - static_cast<size_t>(args_.root)) % n_;
    if (n_ == 1 || args_.count == 0) return;
    if (position_ == 0) {
      for (size_t q = 1; q < n_; ++q)
        send_to(member(q), kScatterStep, at(piece(q)), bytes(piece(q)));
      for (size_t t = 0; t + 1 < n_; ++t)
        send_to(member(1), kRingStep, at(piece(n_ - t)), bytes(piece(n_ - t)));
      pending_send_ = n_;  // the root sent everything up front
      return;
    }
    scatter_recv_ =
        recv_from(member(0), kScatterStep, at(piece(position_)), bytes(piece(position_)));
    for (size_t t = 0; t + 1 < n_; ++t) {
      const size_t p = piece(position_ + n_ - t - 1);
      ring_recvs_.push_back(recv_from(member(position_ - 1), kRingStep, at(p), bytes(p)));
    }
    pending_send_ = position_ + 1 < n_ ? 0 : n_;  // the last position forwards nothing
  }

  State advance() override {
    if (failed()) return step_done() ? State::failed : State::running;
    if (n_ == 1 || args_.count == 0) return State::done;
    // Ring step t sends piece position - t: our own piece first (once scattered to us), then
    // each piece the step before delivered.
    while (pending_send_ + 1 < n_) {
      const bool ready =
          pending_send_ == 0 ? completed(scatter_recv_) : completed(ring_recvs_[pending_send_ - 1]);
      if (!ready) break;
      const size_t p = piece(position_ + n_ - pending_send_);
      send_to(member(position_ + 1), kRingStep, at(p), bytes(p));
      ++pending_send_;
    }
    return step_done() && (position_ == 0 || pending_send_ + 1 >= n_) ? State::done
                                                                      : State::running;
  }

 private:
  size_t piece(size_t q) const { return q % n_; }
  int member(size_t position) const {
    return static_cast<int>((position + static_cast<size_t>(args_.root)) % n_);
  }
  std::byte* at(size_t q) const {
    return data_ + part(args_.count, n_, q).begin * type_size(args_.type);
  }
  size_t bytes(size_t q) const { return part(args_.count, n_, q).count * type_size(args_.type); }

  size_t n_ = 1, position_ = 0;
  std::byte* data_ = nullptr;
  size_t scatter_recv_ = 0;
  std::vector<size_t> ring_recvs_;
  size_t pending_send_ = 0;  // ring step whose send is next
};

}  // namespace

std::unique_ptr<CollectiveTask> make_scatter_allgather_bcast(Group group, CollectiveArgs args,
                                                             uint64_t base_tag) {
  return std::make_unique<ScatterAllgather>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
