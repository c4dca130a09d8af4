#include "collectives/bcast/rails.h"

#include "collectives/partition.h"
#include "collectives/schedule.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_rails_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag) {
  NodeLayout& layout = *group.layout;
  const topo::Hierarchy& hierarchy = layout.hierarchy();
  auto schedule = std::make_unique<ScheduleTask>(group, args, base_tag);
  const bool shared = layout.node().size() > 1;
  const bool roots_node = hierarchy.node_index(group.rank) == hierarchy.node_index(args.root);
  const size_t rails = static_cast<size_t>(layout.rails());
  auto slice = [&](size_t rail) {
    const Span span = part(args.count, rails, rail);
    CollectiveArgs s = args;
    s.recv = static_cast<std::byte*>(args.recv) + span.begin * type_size(args.type);
    s.count = span.count;
    return s;
  };
  if (roots_node && shared) {
    CollectiveArgs whole = args;
    whole.root = hierarchy.local_index(args.root);
    schedule->add(0, "the root's node's bcast",
                  layout.flat_call(Collective::bcast, layout.node(), whole, base_tag, 0));
  }
  if (layout.rail().has_me()) {
    CollectiveArgs across = slice(static_cast<size_t>(hierarchy.local_index(group.rank)));
    across.root = hierarchy.node_index(args.root);  // rails hold one member per node, in order
    schedule->add(1, "its rail's bcast",
                  layout.flat_call(Collective::bcast, layout.rail(), across, base_tag, 1));
  }
  if (!roots_node && shared) {
    // Every slice from its rail's member at once: by messages, since a slot turn would wait
    // for the one before it.
    for (size_t rail = 0; rail < rails; ++rail) {
      CollectiveArgs down = slice(rail);
      down.root = static_cast<int>(rail);
      schedule->add(2, "the node's bcast of a slice",
                    layout.flat_call(Collective::bcast, layout.node(), down, base_tag,
                                     2 + static_cast<int>(rail), false));
    }
  }
  return schedule;
}

}  // namespace ibcoll::collectives
