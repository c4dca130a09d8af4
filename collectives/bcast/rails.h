// Bcast across nodes with every rail carrying a slice (large vectors): the root gives the
// vector to its node; the vector is cut into as many slices as the smallest node has members,
// and the member with local index i on the root's node broadcasts slice i to rail i (its
// counterparts on the other nodes), all rails at once, each over its own connections; last,
// on every other node, the member with local index i broadcasts slice i to its node.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_rails_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag);

}  // namespace ibcoll::collectives
