#include "collectives/bcast/rails.h"

#include "collectives/schedule.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_rails_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag) {
  NodeLayout& layout = *group.layout;
  const topo::Hierarchy& hierarchy = layout.hierarchy();
  auto schedule = std::make_unique<ScheduleTask>(group, args, base_tag);
  const bool shared = layout.node().size() > 1;
  const bool roots_node = hierarchy.node_index(group.rank) == hierarchy.node_index(args.root);
  if (roots_node && shared) {
    CollectiveArgs whole = args;
    whole.root = hierarchy.local_index(args.root);
    schedule->add(0, "the root's node's bcast",
                  layout.flat_call(Collective::bcast, layout.node(), whole, base_tag, 0));
  }
  if (layout.rail().has_me()) {
    CollectiveArgs across = layout.slice(args, hierarchy.local_index(group.rank));
    across.root = hierarchy.node_index(args.root);  // rails hold one member per node, in order
    schedule->add(1, "its rail's bcast",
                  layout.flat_call(Collective::bcast, layout.rail(), across, base_tag, 1));
  }
  if (!roots_node && shared) {
    for (auto& call : layout.node_allgather(args, base_tag, 2))
      schedule->add(2, "the node's bcast of a slice", std::move(call));
  }
  return schedule;
}

}  // namespace ibcoll::collectives
