#include "collectives/allreduce/rails.h"

#include "collectives/schedule.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_rails_allreduce(Group group, CollectiveArgs args,
                                                     uint64_t base_tag) {
  NodeLayout& layout = *group.layout;
  auto schedule = std::make_unique<ScheduleTask>(group, args, base_tag);
  const bool shared = layout.node().size() > 1;
  if (shared) {
    if (auto scatter = layout.node_reduce_scatter(args, base_tag, 0)) {
      schedule->add(0, "the node's reduce-scatter into the rails' slices", std::move(scatter));
    } else {
      schedule->add(0, "the node's allreduce",
                    layout.flat_call(Collective::allreduce, layout.node(), args, base_tag, 0));
    }
  }
  if (layout.rail().has_me()) {
    CollectiveArgs node_result = args;
    if (shared) node_result.send = args.recv;  // the node's result, in place
    const CollectiveArgs slice =
        layout.slice(node_result, layout.hierarchy().local_index(group.rank));
    schedule->add(1, "its rail's allreduce",
                  layout.flat_call(Collective::allreduce, layout.rail(), slice, base_tag, 1));
  }
  if (shared) {
    for (auto& call : layout.node_allgather(args, base_tag, 2))
      schedule->add(2, "the node's bcast of a slice", std::move(call));
  }
  return schedule;
}

}  // namespace ibcoll::collectives
