// Light bcast: a small checked bcast whose receivers send nothing back. It sends exactly the
// messages of the checked doubling bcast (bcast/doubling.h) that carry the vector, from a member
// that has it to a partner that has not (the same steps, fields first), so the vector runs down
// a binomial tree from the root, highest bits first (one message into each node of consecutive
// ranks), and each receiver takes one message. A receiver folds the
// fields that came with it into its own: a call of another kind, size or root shows there, and
// its subtree sees it in the fields passed on. What no message carries is settled elsewhere: a
// member that waits on a partner that is not going to send learns so by probing it
// (probe_desk.h), and a root, which hears nothing, learns of a mismatch at the communicator's
// next fully checked call, which carries a digest of the light calls since the last one.
#pragma once

#include <memory>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_light_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag, const CallSignature& signature);

}  // namespace ibcoll::collectives
