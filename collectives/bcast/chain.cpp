#include "collectives/bcast/chain.h"

#include <algorithm>
#include <vector>

#include "collectives/partition.h"

namespace ibcoll::collectives {
namespace {

constexpr size_t kSegmentBytes = 256 << 10;

class ChainBcast final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    const size_t n = static_cast<size_t>(group_.size());
    const size_t position =
        (static_cast<size_t>(group_.rank) + n - static_cast<size_t>(args_.root)) % n;
    const size_t bytes = args_.count * type_size(args_.type);
    segments_ = std::max<size_t>(1, (bytes + kSegmentBytes - 1) / kSegmentBytes);
    data_ = static_cast<std::byte*>(args_.recv);
    has_next_ = position + 1 < n;
    next_ = static_cast<int>((static_cast<size_t>(group_.rank) + 1) % n);
    if (n == 1 || bytes == 0) return;
    if (position == 0) {
      for (size_t j = 0; j < segments_; ++j)
        send_to(next_, 0, at(j), size(j));
      forwarded_ = segments_;
      return;
    }
    const int previous = static_cast<int>((static_cast<size_t>(group_.rank) + n - 1) % n);
    for (size_t j = 0; j < segments_; ++j)
      recvs_.push_back(recv_from(previous, 0, at(j), size(j)));
  }

  State advance() override {
    if (failed()) return step_done() ? State::failed : State::running;
    while (forwarded_ < recvs_.size() && completed(recvs_[forwarded_])) {
      if (has_next_) send_to(next_, 0, at(forwarded_), size(forwarded_));
      ++forwarded_;
    }
    return step_done() && forwarded_ >= recvs_.size() ? State::done : State::running;
  }

 private:
  Span segment(size_t j) const { return part(args_.count, segments_, j); }
  std::byte* at(size_t j) const { return data_ + segment(j).begin * type_size(args_.type); }
  size_t size(size_t j) const { return segment(j).count * type_size(args_.type); }

  std::byte* data_ = nullptr;
  size_t segments_ = 1, forwarded_ = 0;
  std::vector<size_t> recvs_;
  bool has_next_ = false;
  int next_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_chain_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag) {
  return std::make_unique<ChainBcast>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
