// Algorithm selection: a default table by message size and group size, which a forced name
// (IBCOLL_ALLREDUCE_ALGO / IBCOLL_BCAST_ALGO, passed down by the runtime) overrides.
#pragma once

#include <string_view>

#include "collectives/registry.h"

namespace ibcoll::collectives {

// The algorithm for `bytes` per rank on `ranks` ranks, `slots` saying whether the group has
// the node's slot region: `forced` when it is not empty or "auto" and can run here (an unknown
// name is Error(invalid_argument) naming the choices), else the table's.
const Algorithm& select_algorithm(Collective collective, size_t bytes, int ranks, bool slots,
                                  std::string_view forced);

}  // namespace ibcoll::collectives
