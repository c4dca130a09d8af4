// Algorithm selection: a default table by message size and group size, which a forced name
// (IBCOLL_ALLREDUCE_ALGO / IBCOLL_BCAST_ALGO, passed down by the runtime) overrides.
#pragma once

#include <string_view>

#include "collectives/registry.h"

namespace ibcoll::collectives {

// The algorithm for `bytes` per rank on `ranks` ranks: `forced` when it is not empty or
// "auto" (Error(invalid_argument) naming the choices for an unknown name), else the table's.
const Algorithm& select_algorithm(Collective collective, size_t bytes, int ranks,
                                  std::string_view forced);

}  // namespace ibcoll::collectives
