// Allreduce by recursive doubling: log2(p) exchange steps of the whole vector, each partner
// combining the lower member's data first, so every member computes the very same bits. With
// p not a power of two, the first 2·(p − 2^k) members pair up first: the even one hands its
// data to the odd one, sits out the doubling, and gets the result back at the end.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_recursive_doubling_allreduce(Group group, CollectiveArgs args,
                                                                  uint64_t base_tag);

}  // namespace ibcoll::collectives
