// Broadcast as scatter + allgather (van de Geijn; large messages, many ranks): the vector is cut
// into one piece per member; a binomial tree scatters them (the root hands each subtree its
// pieces in one message), then the pieces travel along a chain from the root, each member
// passing a piece on as soon as it has it and skipping those the next one already holds. The
// root sends about N instead of N·log p, and no member talks to more than log2 p + 2 others
// (a flat scatter had the root talk to every member: p connections at scale).
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_scatter_allgather_bcast(Group group, CollectiveArgs args,
                                                             uint64_t base_tag);

}  // namespace ibcoll::collectives
