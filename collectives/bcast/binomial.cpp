#include "collectives/bcast/binomial.h"

namespace ibcoll::collectives {
namespace {

class BinomialBcast final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    const int n = group_.size();
    relative_ = (group_.rank - args_.root + n) % n;
    bytes_ = args_.count * type_size(args_.type);
    // The parent is the member that differs in our lowest set bit.
    mask_ = 1;
    while (mask_ < n && !(relative_ & mask_))
      mask_ <<= 1;
    if (relative_ != 0) {
      recv_from(member(relative_ - mask_), 0, args_.recv, bytes_);
      receiving_ = true;
    } else {
      forward();
    }
  }

  State advance() override {
    if (!step_done()) return State::running;
    if (failed()) return State::failed;
    if (!receiving_) return State::done;
    receiving_ = false;
    forward();
    return step_done() ? State::done : State::running;
  }

 private:
  int member(int relative) const { return (relative + args_.root) % group_.size(); }
  void forward() {
    for (int child = mask_ >> 1; child > 0; child >>= 1) {
      if (relative_ + child < group_.size())
        send_to(member(relative_ + child), 0, args_.recv, bytes_);
    }
  }

  int relative_ = 0, mask_ = 1;
  size_t bytes_ = 0;
  bool receiving_ = false;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_binomial_bcast(Group group, CollectiveArgs args,
                                                    uint64_t base_tag) {
  return std::make_unique<BinomialBcast>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
