// Allreduce through the node's staging halves (large messages, every member on this node): in
// chunks, each rank puts the parts of its vector that the others reduce into its staging half,
// reduces its own part from everyone's (in member order), publishes the result there, and
// copies the others' results out. Every byte crosses between cores once each way, with no
// message and no copy through a ring. Checks the call itself, with a slot exchange first.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_staged_allreduce(Group group, CollectiveArgs args,
                                                      uint64_t base_tag);

}  // namespace ibcoll::collectives
