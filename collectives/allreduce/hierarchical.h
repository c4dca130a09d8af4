// Allreduce across nodes in three stages of flat calls (collectives/schedule.h): the node's
// members allreduce among themselves (through the node's slots when they fit), the node
// leaders allreduce the node results across nodes, each leader broadcasts the result to its
// node. Only one member per node touches the network; small and medium messages.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_hierarchical_allreduce(Group group, CollectiveArgs args,
                                                            uint64_t base_tag);

}  // namespace ibcoll::collectives
