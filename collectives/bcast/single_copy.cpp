#include "collectives/bcast/single_copy.h"

#include <cstring>
#include <optional>

#include "collectives/slot_task.h"

namespace ibcoll::collectives {
namespace {

using Region = transport::shm::SlotRegion;

class SingleCopyBcast final : public SlotTask {
 public:
  SingleCopyBcast(const Group& group, const CollectiveArgs& args, uint64_t base_tag)
      : SlotTask(group, args, base_tag, Collective::bcast, args.root),
        where_{reinterpret_cast<uint64_t>(args.recv), bytes()} {}

 private:
  struct Where {
    uint64_t address, bytes;
  };

  const char* name() const override { return "single_copy"; }
  bool root() const { return group_.rank == args_.root; }
  Region::Slot& slot_of(int member) const { return group_.slots->slot_of(member); }

  std::pair<const void*, size_t> contribution() const override {
    return {&where_, root() ? sizeof(where_) : 0};
  }
  void consume(const SlotExchange&) override {}

  bool finish(const SlotExchange& exchange, Status& trouble) override {
    return root() ? all_copied(exchange, trouble) : copy(exchange, trouble);
  }

  // A receiver: the root's vector into its own, unless the call differs from the root's.
  bool copy(const SlotExchange& exchange, Status& trouble) {
    Where root_where{};
    if (exchange.verdict().ok())
      std::memcpy(&root_where, exchange.data_of(args_.root), sizeof(Where));
    if (root_where.bytes > 0) {
      trouble = group_.slots->read_from(args_.root, root_where.address,
                                        static_cast<std::byte*>(args_.recv), bytes(),
                                        "single-copy bcast");
    }
    Region::store(slot_of(group_.rank).copied.call, group_.slot_sequence);
    return true;
  }

  // The root: true once every other member is done with its buffer; a member whose call
  // differs (it says it is done without reading), or that gave up or died, ends the wait with
  // `trouble`. Each member's call is compared once it is published.
  bool all_copied(const SlotExchange& exchange, Status& trouble) {
    for (; next_ < group_.size(); ++next_) {
      if (next_ == group_.rank) continue;
      const std::optional<Status> call = exchange.published_by(next_);
      if (call && !call->ok()) {
        trouble = *call;
        group_.slots->forget_unverified(group_.slot_sequence);  // reported here
        return true;
      }
      if (call && Region::load(slot_of(next_).copied.call) >= group_.slot_sequence) continue;
      trouble = group_.slots->trouble(next_, ++idle_);
      return !trouble.ok();
    }
    return true;
  }

  Where where_;
  int next_ = 0;  // the root's next member to wait for
  uint32_t idle_ = 0;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_single_copy_bcast(Group group, CollectiveArgs args,
                                                       uint64_t base_tag) {
  return std::make_unique<SingleCopyBcast>(group, args, base_tag);
}

Status run_single_copy_bcast_here(const Group& group, const CollectiveArgs& args, uint64_t base_tag,
                                  WaitUntil wait) {
  return SingleCopyBcast(group, args, base_tag).run_here(wait);
}

}  // namespace ibcoll::collectives
