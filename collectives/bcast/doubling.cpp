#include "collectives/bcast/doubling.h"

#include <cstring>

#include "collectives/doubling_exchange.h"

namespace ibcoll::collectives {
namespace {

class DoublingBcast final : public DoublingExchange {
 public:
  DoublingBcast(Group group, CollectiveArgs args, uint64_t base_tag, const CallSignature& signature)
      : DoublingExchange(std::move(group), args, base_tag, signature,
                         args.count * type_size(args.type)) {}

 private:
  void begin() override {
    have_ = group_.rank == args_.root;
    if (have_) {
      vector_ = static_cast<std::byte*>(args_.recv);
    } else {
      held_.allocate(payload_bytes_);
      vector_ = held_.data();
    }
  }
  // The root has the vector and takes nothing: its caller may have the call back once its
  // messages are sent (from the exchange's copy).
  bool needs_nothing_received() const override { return group_.rank == args_.root; }
  std::span<const std::byte> payload() const override {
    return have_ ? std::span<const std::byte>(vector_, payload_bytes_)
                 : std::span<const std::byte>();
  }
  // A message of this call's length carries the vector; the fields alone do not. (With the
  // count 0 both are the fields alone, and every message brings the empty vector.)
  void absorb(int, std::byte* incoming, bool) override {
    if (have_ || !incoming) return;
    if (payload_bytes_ > 0) std::memcpy(vector_, incoming, payload_bytes_);
    have_ = true;
  }
  Status finish_payload() override {
    if (!have_) return Status(Code::internal, "bcast: the root's vector never came");
    if (group_.rank != args_.root && payload_bytes_ > 0) {
      std::memcpy(args_.recv, vector_, payload_bytes_);
    }
    return {};
  }

  bool have_ = false;
  std::byte* vector_ = nullptr;
  Scratch held_;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_checked_doubling_bcast(Group group, CollectiveArgs args,
                                                            uint64_t base_tag,
                                                            const CallSignature& signature) {
  return std::make_unique<DoublingBcast>(std::move(group), args, base_tag, signature);
}

}  // namespace ibcoll::collectives
