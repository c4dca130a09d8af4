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
// The same passes without the last: members 0..owners-1 each own the contiguous slice
// part(count, owners, m) of the vector, and each one's output gets its own slice reduced (in
// member order, as the allreduce reduces it); the rest of every output is left as it was.
std::unique_ptr<CollectiveTask> make_staged_reduce_scatter(Group group, CollectiveArgs args,
                                                           uint64_t base_tag, int owners);

}  // namespace ibcoll::collectives
