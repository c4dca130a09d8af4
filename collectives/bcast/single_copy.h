// Bcast by single copy through the node's slot region (every member on this node, sizes the
// node's single copy takes): the root publishes where its vector lies, not the vector; every
// other rank, once it sees the root's call, copies the vector straight from the root's memory
// (process_vm_readv) into its own, all at once, and says so in its slot. The root's call ends
// once every member has said so: one copy per receiver, none waiting on another, and nothing
// read from the root's buffer after its call returned. Signatures are compared as in the slots
// bcast (slot_exchange.h); a receiver that differs from the root still says it is done, and the
// root, seeing its call, fails at once rather than waiting for it.
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_single_copy_bcast(Group group, CollectiveArgs args,
                                                       uint64_t base_tag);
Status run_single_copy_bcast_here(const Group& group, const CollectiveArgs& args, uint64_t base_tag,
                                  WaitUntil wait);

}  // namespace ibcoll::collectives
