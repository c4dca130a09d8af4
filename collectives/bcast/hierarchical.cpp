#include "collectives/bcast/hierarchical.h"

#include "collectives/schedule.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_hierarchical_bcast(Group group, CollectiveArgs args,
                                                        uint64_t base_tag) {
  NodeLayout& layout = *group.layout;
  const topo::Hierarchy& hierarchy = layout.hierarchy();
  auto schedule = std::make_unique<ScheduleTask>(group, args, base_tag);
  const Subgroup& leaders = schedule->keep(
      layout.leaders_for_root(args.root, group.peers[static_cast<size_t>(args.root)]));
  const bool roots_node = hierarchy.node_index(group.rank) == hierarchy.node_index(args.root);
  if (leaders.has_me()) {
    CollectiveArgs across = args;
    across.root = hierarchy.node_index(args.root);
    schedule->add(0, "the leaders' bcast",
                  layout.flat_call(Collective::bcast, leaders, across, base_tag, 0));
  }
  if (layout.node().size() > 1) {
    CollectiveArgs down = args;
    down.root = roots_node ? hierarchy.local_index(args.root) : 0;
    schedule->add(1, "the node's bcast",
                  layout.flat_call(Collective::bcast, layout.node(), down, base_tag, 1));
  }
  return schedule;
}

}  // namespace ibcoll::collectives
