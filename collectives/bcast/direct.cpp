#include "collectives/bcast/direct.h"

namespace ibcoll::collectives {
namespace {

class DirectBcast final : public CollectiveTask {
 public:
  using CollectiveTask::CollectiveTask;

  void start() override {
    const size_t bytes = args_.count * type_size(args_.type);
    if (group_.rank != args_.root) {
      recv_from(args_.root, 0, args_.recv, bytes);
      return;
    }
    for (int member = 0; member < group_.size(); ++member) {
      if (member != args_.root) send_to(member, 0, args_.recv, bytes);
    }
  }

  State advance() override {
    if (!step_done()) return State::running;
    return failed() ? State::failed : State::done;
  }
};

}  // namespace

std::unique_ptr<CollectiveTask> make_direct_bcast(Group group, CollectiveArgs args,
                                                  uint64_t base_tag) {
  return std::make_unique<DirectBcast>(std::move(group), args, base_tag);
}

}  // namespace ibcoll::collectives
