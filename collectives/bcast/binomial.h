// Broadcast down a binomial tree rooted at the root: a member receives the whole vector once
// from its parent, then forwards it to its children, the farthest subtree first.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_binomial_bcast(Group group, CollectiveArgs args,
                                                    uint64_t base_tag);

}  // namespace ibcoll::collectives
