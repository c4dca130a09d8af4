#include "collectives/allreduce/rabenseifner.h"

#include <cstring>
#include <vector>

#include "collectives/allreduce/folding.h"
#include "collectives/partition.h"
#include "collectives/scratch.h"

namespace ibcoll::collectives {
namespace {

class Rabenseifner final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    element_ = type_size(args_.type);
    result_ = static_cast<std::byte*>(args_.recv);
    if (args_.send != args_.recv && args_.count > 0) {
      std::memcpy(result_, args_.send, args_.count * element_);
    }
    // Folding receives a whole vector; the first halving, the larger half.
    incoming_.allocate(folding_.paired(group_.rank) ? args_.count * element_
                                                    : (args_.count + 1) / 2 * element_);
    const int me = group_.rank;
    virtual_rank_ = folding_.virtual_rank(me);
    if (folding_.sits_out(me)) {
      send_to(me + 1, kFoldStep, result_, args_.count * element_);
      phase_ = Phase::folded_out;
    } else if (folding_.paired(me)) {
      recv_from(me - 1, kFoldStep, incoming_.data(), args_.count * element_);
      phase_ = Phase::folding_in;
    } else {
      begin_halving();
    }
  }

  State advance() override {
    while (true) {
      if (!step_done()) return State::running;
      if (failed()) return State::failed;
      switch (phase_) {
        case Phase::folding_in:
          combine(result_, incoming_.data(), args_.count, args_.type, args_.op, true);
          begin_halving();
          break;
        case Phase::folded_out:
          recv_from(group_.rank + 1, kFinalStep, result_, args_.count * element_);
          phase_ = Phase::unfolding;
          break;
        case Phase::halving:
          combine(at(window_), incoming_.data(), window_.count, args_.type, args_.op,
                  partner() < group_.rank);
          mask_ >>= 1;
          if (mask_ > 0) {
            halve();
          } else {
            mask_ = 1;
            phase_ = Phase::doubling;
            double_up();
          }
          break;
        case Phase::doubling:
          window_ = windows_.back();
          windows_.pop_back();
          mask_ <<= 1;
          if (mask_ < folding_.pof2) {
            double_up();
          } else if (folding_.paired(group_.rank)) {
            send_to(group_.rank - 1, kFinalStep, result_, args_.count * element_);
            phase_ = Phase::unfolding;
          } else {
            return State::done;
          }
          break;
        case Phase::unfolding:
          return State::done;
      }
    }
  }

 private:
  enum class Phase { folding_in, folded_out, halving, doubling, unfolding };
  static constexpr uint32_t kFoldStep = 0, kHalvingStep = 1, kDoublingStep = 40, kFinalStep = 63;

  int partner() const { return folding_.member_of(virtual_rank_ ^ mask_); }
  uint32_t level() const {
    return static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(mask_)));
  }
  std::byte* at(const Span& s) const { return result_ + s.begin * element_; }
  bool keeps_lower() const { return (virtual_rank_ & mask_) == 0; }

  void begin_halving() {
    window_ = {0, args_.count};
    if (folding_.pof2 == 1) {
      phase_ = Phase::unfolding;
      return;
    }
    mask_ = folding_.pof2 / 2;
    phase_ = Phase::halving;
    halve();
  }
  // Keep one half of the window, send the other to the partner, receive its copy of ours.
  void halve() {
    const Span lower{window_.begin, window_.count / 2};
    const Span upper{lower.end(), window_.count - lower.count};
    const Span keep = keeps_lower() ? lower : upper, give = keeps_lower() ? upper : lower;
    windows_.push_back(window_);
    send_to(partner(), kHalvingStep + level(), at(give), give.count * element_);
    recv_from(partner(), kHalvingStep + level(), incoming_.data(), keep.count * element_);
    window_ = keep;
  }
  // Send our reduced window; the partner's is the rest of the window one level up.
  void double_up() {
    const Span parent = windows_.back();
    const Span theirs = window_.begin == parent.begin
                            ? Span{window_.end(), parent.count - window_.count}
                            : Span{parent.begin, parent.count - window_.count};
    send_to(partner(), kDoublingStep + level(), at(window_), window_.count * element_);
    recv_from(partner(), kDoublingStep + level(), at(theirs), theirs.count * element_);
  }

  Folding folding_{group_.size()};
  size_t element_ = 1;
  std::byte* result_ = nullptr;
  Scratch incoming_;
  std::vector<Span> windows_;  // the window before each halving, innermost last
  Span window_;
  int virtual_rank_ = 0, mask_ = 1;
  Phase phase_ = Phase::halving;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_rabenseifner_allreduce(Group group, CollectiveArgs args,
                                                            uint64_t base_tag) {
  return std::make_unique<Rabenseifner>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
