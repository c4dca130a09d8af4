#include "collectives/allreduce/rails.h"

#include "collectives/partition.h"
#include "collectives/schedule.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_rails_allreduce(Group group, CollectiveArgs args,
                                                     uint64_t base_tag) {
  NodeLayout& layout = *group.layout;
  auto schedule = std::make_unique<ScheduleTask>(group, args, base_tag);
  const bool shared = layout.node().size() > 1;
  const size_t rails = static_cast<size_t>(layout.rails());
  const size_t element = type_size(args.type);
  auto output_of = [&](size_t rail) {  // slice `rail` of recv
    return static_cast<std::byte*>(args.recv) + part(args.count, rails, rail).begin * element;
  };
  if (shared) {
    schedule->add(0, "the node's allreduce",
                  layout.flat_call(Collective::allreduce, layout.node(), args, base_tag, 0));
  }
  if (layout.rail().has_me()) {
    const size_t rail = static_cast<size_t>(layout.hierarchy().local_index(group.rank));
    const Span span = part(args.count, rails, rail);
    CollectiveArgs slice = args;
    slice.count = span.count;
    slice.send =
        static_cast<const std::byte*>(shared ? args.recv : args.send) + span.begin * element;
    slice.recv = output_of(rail);
    schedule->add(1, "its rail's allreduce",
                  layout.flat_call(Collective::allreduce, layout.rail(), slice, base_tag, 1));
  }
  if (shared) {
    // Every slice from its rail's member at once: by messages, since a slot turn would wait
    // for the one before it.
    for (size_t rail = 0; rail < rails; ++rail) {
      CollectiveArgs slice = args;
      slice.recv = output_of(rail);
      slice.count = part(args.count, rails, rail).count;
      slice.root = static_cast<int>(rail);
      schedule->add(2, "the node's bcast of a slice",
                    layout.flat_call(Collective::bcast, layout.node(), slice, base_tag,
                                     2 + static_cast<int>(rail), false));
    }
  }
  return schedule;
}

}  // namespace ibcoll::collectives
