// Bcast through the node's slot region (small messages, every member on this node): the root
// publishes its vector in its slot, every other rank copies it out once the root's sequence
// number shows. Every rank also publishes its signature, so a mismatch fails them all.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_slots_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag);

}  // namespace ibcoll::collectives
