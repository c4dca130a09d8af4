// Rabenseifner's allreduce (medium and large messages): a reduce-scatter by recursive halving,
// each member ending with the sum of its own 1/p of the vector, then an allgather by recursive
// doubling. Moves about 2·N per member instead of N·log p; non-powers of two fold in first.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_rabenseifner_allreduce(Group group, CollectiveArgs args,
                                                            uint64_t base_tag);

}  // namespace ibcoll::collectives
