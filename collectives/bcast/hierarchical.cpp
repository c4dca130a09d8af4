#include "collectives/bcast/hierarchical.h"

#include "collectives/schedule.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_hierarchical_bcast(Group group, CollectiveArgs args,
                                                        uint64_t base_tag) {
  NodeLayout& layout = *group.layout;
  const topo::Hierarchy& hierarchy = layout.hierarchy();
  auto schedule = std::make_unique<ScheduleTask>(group, args, base_tag);
  const bool roots_node = hierarchy.node_index(group.rank) == hierarchy.node_index(args.root);
  const int root_local = hierarchy.local_index(args.root);
  const bool node_first = roots_node && root_local != 0;
  auto node_bcast = [&](int stage) {
    if (layout.node().size() == 1) return;
    CollectiveArgs down = args;
    down.root = roots_node ? root_local : 0;
    schedule->add(stage, "the node's bcast",
                  layout.flat_call(Collective::bcast, layout.node(), down, base_tag, 1));
  };
  if (node_first) node_bcast(0);
  if (layout.leaders().has_me()) {
    CollectiveArgs across = args;
    across.root = hierarchy.node_index(args.root);
    schedule->add(1, "the leaders' bcast",
                  layout.flat_call(Collective::bcast, layout.leaders(), across, base_tag, 0));
  }
  if (!node_first) node_bcast(2);
  return schedule;
}

}  // namespace ibcoll::collectives
