// Checked bcast for small vectors: the call check's recursive doubling (doubling_exchange.h)
// carries the root's vector too. A member that has the vector sends it with its fields, one
// that has not yet sends its fields alone, so the vector spreads down a binomial tree (rooted at
// the root, in the exchange's pairing) while the check runs, and the check costs no round of
// its own. The vector waits in scratch and reaches the caller's buffer only once the calls are
// known to agree.
#pragma once

#include <memory>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_checked_doubling_bcast(Group group, CollectiveArgs args,
                                                            uint64_t base_tag,
                                                            const CallSignature& signature);

}  // namespace ibcoll::collectives
