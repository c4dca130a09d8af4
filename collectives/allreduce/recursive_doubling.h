// Allreduce by recursive doubling (doubling_exchange.h): log2(p) exchange steps of the whole
// vector, each partner combining the lower member's data first, so every member computes the
// very same bits. Non-powers of two fold in first. Checked, it is also the call check.
#pragma once

#include <memory>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_recursive_doubling_allreduce(Group group, CollectiveArgs args,
                                                                  uint64_t base_tag);
std::unique_ptr<CollectiveTask> make_checked_recursive_doubling_allreduce(
    Group group, CollectiveArgs args, uint64_t base_tag, const CallSignature& signature);

}  // namespace ibcoll::collectives
