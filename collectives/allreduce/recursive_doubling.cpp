#include "collectives/allreduce/recursive_doubling.h"

#include <cstring>
#include <vector>

#include "collectives/allreduce/folding.h"

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
    const int me = group_.rank;
    virtual_rank_ = folding_.virtual_rank(me);
    if (folding_.sits_out(me)) {  // hand the data to the odd neighbour, wait for the result
      send_to(me + 1, 0, result_, bytes_);
      phase_ = Phase::folded_out;
    } else if (folding_.paired(me)) {
      recv_from(me - 1, 0, incoming_.data(), bytes_);
      phase_ = Phase::folding_in;
    } else {
      begin_doubling();
    }
  }

  State advance() override {
    while (true) {
      if (!step_done()) return State::running;
      if (failed()) return State::failed;
      switch (phase_) {
        case Phase::folding_in:
          combine_with(group_.rank - 1);
          begin_doubling();
          break;
        case Phase::folded_out:
          recv_from(group_.rank + 1, kFinalStep, result_, bytes_);
          phase_ = Phase::unfolding;
          break;
        case Phase::doubling:
          combine_with(folding_.member_of(virtual_rank_ ^ mask_));
          mask_ <<= 1;
          if (mask_ < folding_.pof2) {
            exchange();
          } else if (folding_.paired(group_.rank)) {  // give the even neighbour its result
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

  void begin_doubling() {
    mask_ = 1;
    if (folding_.pof2 == 1) {  // alone: the result is our own data
      phase_ = Phase::unfolding;
      return;
    }
    phase_ = Phase::doubling;
    exchange();
  }
  void exchange() {
    const int partner = folding_.member_of(virtual_rank_ ^ mask_);
    const auto step = static_cast<uint32_t>(1 + __builtin_ctz(static_cast<unsigned>(mask_)));
    send_to(partner, step, result_, bytes_);
    recv_from(partner, step, incoming_.data(), bytes_);
  }
  void combine_with(int other) {
    combine(result_, incoming_.data(), args_.count, args_.type, args_.op, other < group_.rank);
  }

  Folding folding_{group_.size()};
  size_t bytes_ = 0;
  std::byte* result_ = nullptr;
  std::vector<std::byte> incoming_;
  int virtual_rank_ = 0, mask_ = 1;
  Phase phase_ = Phase::doubling;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_recursive_doubling_allreduce(Group group, CollectiveArgs args,
                                                                  uint64_t base_tag) {
  return std::make_unique<RecursiveDoubling>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
