// Bcast across nodes in two stages of flat calls (collectives/schedule.h): the root and the
// leader of every other node broadcast among themselves, then each of them to its node (through
// the node's slots when the vector fits). The vector crosses the network once per node.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_hierarchical_bcast(Group group, CollectiveArgs args,
                                                        uint64_t base_tag);

}  // namespace ibcoll::collectives
