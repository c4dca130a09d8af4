// Allreduce across nodes with every member on the network (large messages): the vector is cut
// into as many slices as the smallest node has members; the node's members reduce-scatter it
// through the staging halves, the member with local index i getting slice i (without the slot
// region: a node allreduce); the members with local index i on every node (rail i) allreduce
// slice i, all rails at once, each over its own connections; last, the member with local index
// i broadcasts slice i to its node. Each rank sends 1/rails of the vector across nodes.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_rails_allreduce(Group group, CollectiveArgs args,
                                                     uint64_t base_tag);

}  // namespace ibcoll::collectives
