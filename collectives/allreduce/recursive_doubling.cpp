#include "collectives/allreduce/recursive_doubling.h"

#include <cstring>
#include <optional>

#include "collectives/doubling_exchange.h"

namespace ibcoll::collectives {
namespace {

// The payload is the running result, kept in the receive buffer.
class RecursiveDoubling final : public DoublingExchange {
 public:
  RecursiveDoubling(Group group, CollectiveArgs args, uint64_t base_tag,
                    std::optional<CallSignature> signature)
      : DoublingExchange(std::move(group), args, base_tag, signature,
                         args.count * type_size(args.type)) {}

 private:
  void begin() override {
    result_ = static_cast<std::byte*>(args_.recv);
    if (args_.send != args_.recv && payload_bytes_ > 0) {
      std::memcpy(result_, args_.send, payload_bytes_);
    }
  }
  std::span<const std::byte> payload() const override { return {result_, payload_bytes_}; }
  // Every member sends the whole vector: a message without it means the calls differ.
  void absorb(int other, std::byte* incoming, bool last) override {
    if (!incoming) {
      mark_differs();
    } else if (last) {  // the odd neighbour's final result
      if (payload_bytes_ > 0) std::memcpy(result_, incoming, payload_bytes_);
    } else {
      combine(result_, incoming, args_.count, args_.type, args_.op, other < group_.rank);
    }
  }

  std::byte* result_ = nullptr;
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
