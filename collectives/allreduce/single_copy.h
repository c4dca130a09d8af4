// Allreduce by single copy through the node's slot region (every member on this node, large
// vectors, where the node's single copy works): every rank publishes where its input and output
// lie; each then owns one contiguous slice of the vector, reads that slice of every other
// member's input straight from its process (process_vm_readv, chunk by chunk into its staging
// halves) and folds them in member order into its output, then reads the others' finished
// slices straight from their outputs. About 2.5 N bytes of memory traffic per rank at 2 ranks,
// where the staged allreduce moves 4 N. A call ends once no member reads its buffers any more.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_single_copy_allreduce(Group group, CollectiveArgs args,
                                                           uint64_t base_tag);
Status run_single_copy_allreduce_here(const Group& group, const CollectiveArgs& args,
                                      uint64_t base_tag, WaitUntil wait);

}  // namespace ibcoll::collectives
