// Allreduce around a ring, segmented and pipelined (large messages): a reduce-scatter of p-1
// steps, then an allgather of p-1 steps; each of the p chunks travels in segments, and a
// segment moves on as soon as it has been reduced, so reduction and transfer overlap.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_ring_allreduce(Group group, CollectiveArgs args,
                                                    uint64_t base_tag);

}  // namespace ibcoll::collectives
