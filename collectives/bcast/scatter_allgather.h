// Broadcast as scatter + allgather (van de Geijn; large messages, many ranks): the root sends
// each member its 1/p of the vector, then the pieces travel around a ring, each member passing
// a piece on as soon as it has it. The root sends about N instead of N·log p.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_scatter_allgather_bcast(Group group, CollectiveArgs args,
                                                             uint64_t base_tag);

}  // namespace ibcoll::collectives
