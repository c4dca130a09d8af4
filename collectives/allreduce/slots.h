// Allreduce through the node's slot region (small messages, every member on this node): each
// rank publishes its vector in its slot, then every rank folds all slots in member order. No
// message, no matching: a few cache lines move between cores. Checks the call itself.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_slots_allreduce(Group group, CollectiveArgs args,
                                                     uint64_t base_tag);
Status run_slots_allreduce_here(const Group& group, const CollectiveArgs& args, uint64_t base_tag,
                                WaitUntil wait);

}  // namespace ibcoll::collectives
