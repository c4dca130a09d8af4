#include "collectives/allreduce/recursive_doubling.h"

#include <cstring>
#include <vector>

#include "collectives/reduce_kernels.h"

namespace ibcoll::collectives {
namespace {

class RecursiveDoubling final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    bytes_ = args_.count * type_size(args_.type);
    result_ = static_cast<std::byte*>(args_.recv);
    if (args_.send != args_.recv && bytes_ > 0) std::memcpy(result_, args_.send, bytes_);
    incoming_.resize(bytes_);
    const int n = group_.size(), me = group_.rank;
    pof2_ = 1;
    while (pof2_ * 2 <= n)
      pof2_ *= 2;
    extra_ = n - pof2_;
    if (me < 2 * extra_) {
      if (me % 2 == 0) {  // hand the data to the odd neighbour, wait for the result
        send_to(me + 1, 0, result_, bytes_);
        phase_ = Phase::folded_out;
      } else {
        recv_from(me - 1, 0, incoming_.data(), bytes_);
        phase_ = Phase::folding_in;
      }
      virtual_rank_ = me / 2;
    } else {
      virtual_rank_ = me - extra_;
      begin_doubling();
    }
  }

  State advance() override {
    while (true) {
      if (!step_done()) return State::running;
      if (failed()) return State::failed;
      switch (phase_) {
        case Phase::folding_in:
          combine(group_.rank - 1);  // the even neighbour is the lower member
          begin_doubling();
          break;
        case Phase::folded_out:
          recv_from(group_.rank + 1, kFinalStep, result_, bytes_);
          phase_ = Phase::unfolding;
          break;
        case Phase::doubling:
          combine(member_of(virtual_rank_ ^ mask_));
          mask_ <<= 1;
          if (mask_ < pof2_) {
            exchange();
          } else if (group_.rank < 2 * extra_) {  // odd: give the even neighbour its result
            send_to(group_.rank - 1, kFinalStep, result_, bytes_);
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
  enum class Phase { folding_in, folded_out, doubling, unfolding };
  static constexpr uint32_t kFinalStep = 63;

  int member_of(int virtual_rank) const {
    return virtual_rank < extra_ ? virtual_rank * 2 + 1 : virtual_rank + extra_;
  }
  void begin_doubling() {
    mask_ = 1;
    if (pof2_ == 1) {  // alone: the result is our own data
      phase_ = Phase::unfolding;
      return;
    }
    phase_ = Phase::doubling;
    exchange();
  }
  void exchange() {
    const int partner = member_of(virtual_rank_ ^ mask_);
    const auto step = static_cast<uint32_t>(1 + __builtin_ctz(static_cast<unsigned>(mask_)));
    send_to(partner, step, result_, bytes_);
    recv_from(partner, step, incoming_.data(), bytes_);
  }
  // result = lower member's data (op) higher member's data: the same bits on both sides.
  void combine(int other) {
    if (bytes_ == 0) return;
    if (other < group_.rank) {
      reduce(incoming_.data(), result_, args_.count, args_.type, args_.op);
      std::memcpy(result_, incoming_.data(), bytes_);
    } else {
      reduce(result_, incoming_.data(), args_.count, args_.type, args_.op);
    }
  }

  size_t bytes_ = 0;
  std::byte* result_ = nullptr;
  std::vector<std::byte> incoming_;
  int pof2_ = 1, extra_ = 0, virtual_rank_ = 0, mask_ = 1;
  Phase phase_ = Phase::doubling;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_recursive_doubling_allreduce(Group group, CollectiveArgs args,
                                                                  uint64_t base_tag) {
  return std::make_unique<RecursiveDoubling>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
