// Every algorithm that runs over messages (flat, no slots) forced in turn, an allreduce and a
// bcast at a time, over one transport forced for every peer (IBCOLL_TRANSPORT), 2 to 4 ranks:
// one type of each width class, eager and rendezvous sizes (65 537 elements), every root;
// results checked against a reference and alike on every rank. The kernels are tested
// exhaustively elsewhere; this is about the transport.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/collectives.h"

namespace ibcoll::testing {

// `options` sets IBCOLL_TRANSPORT=`transport` and whatever else it needs; `after` checks more
// on each rank once its calls are done (null: nothing).
inline void every_message_algorithm_over(const std::string& transport, RankOptions options,
                                         std::function<void(const CapiRank&)> after = nullptr) {
  std::vector<std::string> allreduce{"auto"}, bcast{"auto"};
  for (const collectives::Algorithm& a : collectives::algorithms()) {
    if (a.uses_slots) continue;    // the slot region is shared memory: over messages they never run
    if (a.across_nodes) continue;  // one node: the hierarchical ones need pretend nodes
    (a.collective == collectives::Collective::allreduce ? allreduce : bcast).push_back(a.name);
  }
  for (size_t i = 0; i < std::max(allreduce.size(), bcast.size()); ++i) {
    options.environment["IBCOLL_ALLREDUCE_ALGO"] = allreduce[i % allreduce.size()];
    options.environment["IBCOLL_BCAST_ALGO"] = bcast[i % bcast.size()];
    for (int ranks = 2; ranks <= 4; ++ranks) {
      SCOPED_TRACE(options.environment["IBCOLL_ALLREDUCE_ALGO"] + "/" +
                   options.environment["IBCOLL_BCAST_ALGO"] + ", " + std::to_string(ranks) +
                   " ranks over " + transport);
      expect_all_ok(run_ranks(
          ranks,
          [&](int, int) {
            CapiRank r;
            RANK_CHECK(ibcoll_transport(r.world(), (r.rank() + 1) % r.size()) == transport,
                       "IBCOLL_TRANSPORT=" + transport + " routes local ranks over " + transport);
            allreduce_sweep(r.world(), {DataType::int8, DataType::bfloat16, DataType::float64},
                            {0, 1, 1031, 65537});
            bcast_every_root(r.world(), DataType::uint8, {0, 7, 65537});
            if (after) after(r);
            return 0;
          },
          options));
    }
  }
}

// On ranks that name pretend nodes (IBCOLL_NODE): fails the rank unless it reaches the ranks of
// its own node by shm and the others by `between`.
inline void expect_routes(const CapiRank& r, const std::vector<int>& node_of,
                          const std::string& between) {
  const int me = r.rank();
  for (int peer = 0; peer < r.size(); ++peer) {
    const std::string want = peer == me ? "self" : node_of[peer] == node_of[me] ? "shm" : between;
    RANK_CHECK(ibcoll_transport(r.world(), peer) == want,
               "rank " + std::to_string(peer) + " is not reached by " + want);
  }
}

}  // namespace ibcoll::testing
