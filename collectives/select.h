// Algorithm selection: a default table by message size and group size, which a forced name
// (IBCOLL_ALLREDUCE_ALGO / IBCOLL_BCAST_ALGO, passed down by the runtime) overrides.
#pragma once

#include <string_view>

#include "collectives/registry.h"
#include "collectives/tuning.h"
#include "transport/shm/options.h"

namespace ibcoll::collectives {

// What selection knows of a group: alike on every member.
struct GroupShape {
  int ranks = 1;
  bool slots = false;    // every member shares this node's slot region
  int nodes = 1;         // the nodes its members run on
  bool checked = false;  // its calls run the call check (IBCOLL_CHECK_CALLS)
  // The message sizes its members read straight from each other (single copy), when all are on
  // one node and reach each other through shared memory; the node's ranks agree on it.
  transport::shm::SingleCopySizes single_copy;
  NodeTuning tuning;  // its node's thresholds, for groups inside the node
};

// The algorithm for `bytes` per rank on a group of `shape`: `forced` when it is not empty or
// "auto" and can run here (an unknown name is Error(invalid_argument) naming the choices), else
// the table's.
const Algorithm& select_algorithm(Collective collective, size_t bytes, const GroupShape& shape,
                                  std::string_view forced);

}  // namespace ibcoll::collectives
