#include "collectives/allreduce/hierarchical.h"

#include "collectives/schedule.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_hierarchical_allreduce(Group group, CollectiveArgs args,
                                                            uint64_t base_tag) {
  NodeLayout& layout = *group.layout;
  auto schedule = std::make_unique<ScheduleTask>(group, args, base_tag);
  const bool shared = layout.node().size() > 1;
  if (shared) {
    schedule->add(0, "the node's allreduce",
                  layout.flat_call(Collective::allreduce, layout.node(), args, base_tag, 0));
  }
  if (layout.leaders().has_me()) {
    CollectiveArgs across = args;
    if (shared) across.send = args.recv;  // the node's result, in place
    schedule->add(1, "the leaders' allreduce",
                  layout.flat_call(Collective::allreduce, layout.leaders(), across, base_tag, 1));
  }
  if (shared) {
    CollectiveArgs down = args;
    down.root = 0;  // the leader
    schedule->add(2, "the node's bcast",
                  layout.flat_call(Collective::bcast, layout.node(), down, base_tag, 2));
  }
  return schedule;
}

}  // namespace ibcoll::collectives
