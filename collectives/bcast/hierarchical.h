// Bcast across nodes in stages of flat calls (collectives/schedule.h): the node leaders (each
// node's lowest member) broadcast among themselves, then each to its node (through the node's
// slots when the vector fits). A root that is not its node's leader first broadcasts to its
// node. The vector crosses the network once per node, and always between the same leaders:
// with the root itself among them, every leader would connect to every member of its tree
// neighbours' nodes over the roots a job uses (ranks per node × 2 log2 nodes connections).
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_hierarchical_bcast(Group group, CollectiveArgs args,
                                                        uint64_t base_tag);

}  // namespace ibcoll::collectives
