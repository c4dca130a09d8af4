// Bcast through the node's slot region (small messages, every member on this node): the root
// publishes its vector in its slot and is done; every other rank copies it out once the root's
// sequence number shows, without waiting for the others. Every rank also publishes its
// signature, so a mismatch fails them all (some at their next call: slot_exchange.h).
#pragma once

#include <memory>

#include "collectives/task.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_slots_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag);
Status run_slots_bcast_here(const Group& group, const CollectiveArgs& args, uint64_t base_tag,
                            WaitUntil wait);

}  // namespace ibcoll::collectives
