// Broadcast down a pipelined chain (very large messages): root → next → … → last, the vector in
// segments, each member forwarding a segment as soon as it has it, so every link is busy at once
// and the time approaches one transfer of N plus p segment times.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_chain_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag);

}  // namespace ibcoll::collectives
