#include "collectives/allreduce/recursive_doubling.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <optional>
#include <vector>

#include "collectives/allreduce/folding.h"
#include "collectives/scratch.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {
namespace {

using Fields = std::array<uint64_t, 2 * CallSignature::kFields>;  // value, ~value per field

class RecursiveDoubling final : public CollectiveTask {
 public:
  RecursiveDoubling(Group group, CollectiveArgs args, uint64_t base_tag,
                    std::optional<CallSignature> signature)
      : CollectiveTask(std::move(group), args, base_tag) {
    if (!signature) return;
    checked_ = true;
    const auto fields = signature->fields();
    for (size_t i = 0; i < fields.size(); ++i) {
      agreed_[2 * i] = fields[i];
      agreed_[2 * i + 1] = ~fields[i];
    }
  }

  void start() override {
    bytes_ = args_.count * type_size(args_.type);
    result_ = static_cast<std::byte*>(args_.recv);
    if (args_.send != args_.recv && bytes_ > 0) std::memcpy(result_, args_.send, bytes_);
    header_ = checked_ ? sizeof(Fields) : 0;
    incoming_.allocate(header_ + bytes_);
    if (checked_) outgoing_.allocate(header_ + bytes_);
    const int me = group_.rank;
    virtual_rank_ = folding_.virtual_rank(me);
    if (folding_.sits_out(me)) {  // hand the data to the odd neighbour, wait for the result
      send(me + 1, 0);
      phase_ = Phase::folded_out;
    } else if (folding_.paired(me)) {
      receive(me - 1, 0);
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
          absorb(group_.rank - 1);
          begin_doubling();
          break;
        case Phase::folded_out:
          receive(group_.rank + 1, kFinalStep);
          phase_ = Phase::unfolding;
          break;
        case Phase::doubling:
          absorb(folding_.member_of(virtual_rank_ ^ mask_));
          mask_ <<= 1;
          if (mask_ < folding_.pof2) {
            exchange();
          } else if (folding_.paired(group_.rank)) {  // give the even neighbour its result
            send(group_.rank - 1, kFinalStep);
            phase_ = Phase::unfolding;
          } else {
            return finish();
          }
          break;
        case Phase::unfolding:
          if (folding_.sits_out(group_.rank)) take_result();
          return finish();
      }
    }
  }

 private:
  enum class Phase { folding_in, folded_out, doubling, unfolding };
  static constexpr uint32_t kFinalStep = 63;

  uint32_t step(uint32_t s) const { return (checked_ ? kAlgorithmSteps : 0) + s; }
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
    const auto s = static_cast<uint32_t>(1 + __builtin_ctz(static_cast<unsigned>(mask_)));
    send(partner, s);
    receive(partner, s);
  }
  // Unchecked, straight from and into the result; checked, the fields go first.
  void send(int member, uint32_t s) {
    if (!checked_) {
      send_to(member, step(s), result_, bytes_);
      return;
    }
    std::memcpy(outgoing_.data(), agreed_.data(), header_);
    if (bytes_ > 0) std::memcpy(outgoing_.data() + header_, result_, bytes_);
    send_to(member, step(s), outgoing_.data(), outgoing_.size());
  }
  void receive(int member, uint32_t s) {
    last_receive_ = checked_ ? recv_from(member, step(s), incoming_.data(), incoming_.size(), false)
                             : recv_from(member, step(s), incoming_.data(), incoming_.size());
  }
  // Folds in what `other` sent: its fields always, its data only if it was as long as ours
  // (else the fields will show that the calls differ).
  void absorb(int other) {
    if (checked_) {
      Fields theirs;
      std::memcpy(theirs.data(), incoming_.data(), header_);
      for (size_t i = 0; i < agreed_.size(); ++i)
        agreed_[i] = std::min(agreed_[i], theirs[i]);
      if (received(last_receive_) != incoming_.size()) {
        differs_ = true;
        return;
      }
    }
    combine(result_, incoming_.data() + header_, args_.count, args_.type, args_.op,
            other < group_.rank);
  }
  void take_result() {
    if (!checked_) {
      if (bytes_ > 0) std::memcpy(result_, incoming_.data(), bytes_);
      return;
    }
    std::memcpy(agreed_.data(), incoming_.data(), header_);
    if (received(last_receive_) != incoming_.size()) {
      differs_ = true;
    } else if (bytes_ > 0) {
      std::memcpy(result_, incoming_.data() + header_, bytes_);
    }
  }
  State finish() {
    if (!checked_) return State::done;
    std::array<uint64_t, CallSignature::kFields> low{}, high{};
    for (size_t i = 0; i < low.size(); ++i) {
      low[i] = agreed_[2 * i];
      high[i] = ~agreed_[2 * i + 1];
    }
    Status verdict = compare_calls(low, high);
    if (verdict.ok() && differs_) {
      verdict = Status(Code::mismatch, "a peer's message had another length than this rank's");
    }
    if (verdict.ok()) return State::done;
    fail(std::move(verdict));
    return State::failed;
  }

  Folding folding_{group_.size()};
  bool checked_ = false, differs_ = false;
  Fields agreed_{};
  size_t header_ = 0, bytes_ = 0, last_receive_ = 0;
  std::byte* result_ = nullptr;
  Scratch incoming_, outgoing_;
  int virtual_rank_ = 0, mask_ = 1;
  Phase phase_ = Phase::doubling;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_recursive_doubling_allreduce(Group group, CollectiveArgs args,
                                                                  uint64_t base_tag) {
  return std::make_unique<RecursiveDoubling>(std::move(group), args, base_tag, std::nullopt);
}

std::unique_ptr<CollectiveTask> make_checked_recursive_doubling_allreduce(
    Group group, CollectiveArgs args, uint64_t base_tag, const CallSignature& signature) {
  return std::make_unique<RecursiveDoubling>(std::move(group), args, base_tag, signature);
}

}  // namespace ibcoll::collectives
