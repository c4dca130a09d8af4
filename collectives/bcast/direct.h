// Broadcast straight from the root: the root sends the whole vector to every other member, each
// of which receives it from the root alone. Inside a node with single copy (CMA) each send is a
// notice, and every member copies the root's buffer once, all at the same time: one copy per
// receiver, and no receiver waits on another's copy. Through rings it would make the root copy
// for every member, so selection takes it only for sizes the node's single copy takes.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_direct_bcast(Group group, CollectiveArgs args,
                                                  uint64_t base_tag);

}  // namespace ibcoll::collectives
