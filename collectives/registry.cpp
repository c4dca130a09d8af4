#include "collectives/registry.h"

#include <string>

#include "collectives/allreduce/hierarchical.h"
#include "collectives/allreduce/rabenseifner.h"
#include "collectives/allreduce/rails.h"
#include "collectives/allreduce/recursive_doubling.h"
#include "collectives/allreduce/ring.h"
#include "collectives/allreduce/single_copy.h"
#include "collectives/allreduce/slots.h"
#include "collectives/allreduce/staged.h"
#include "collectives/bcast/binomial.h"
#include "collectives/bcast/chain.h"
#include "collectives/bcast/direct.h"
#include "collectives/bcast/doubling.h"
#include "collectives/bcast/hierarchical.h"
#include "collectives/bcast/rails.h"
#include "collectives/bcast/scatter_allgather.h"
#include "collectives/bcast/single_copy.h"
#include "collectives/bcast/slots.h"
#include "collectives/tags.h"
#include "transport/shm/slot_region.h"

namespace ibcoll::collectives {
namespace {

constexpr size_t kSlotBytes = transport::shm::SlotRegion::kDataBytes;
// The checked bcast passes the vector through scratch twice; above this, a separate check's
// round costs less than those copies.
constexpr size_t kCheckedBcastBytes = 8 << 10;

const Algorithm kAlgorithms[] = {
    {.collective = Collective::allreduce,
     .name = "slots",
     .description = "node-local: each rank publishes to its shared slot, all fold the slots in "
                    "rank order",
     .make = make_slots_allreduce,
     .uses_slots = true,
     .run_here = run_slots_allreduce_here,
     .max_bytes = kSlotBytes},
    {.collective = Collective::allreduce,
     .name = "staged",
     .description = "node-local: chunks through shared halves, each rank reduces its part from "
                    "all (large)",
     .make = make_staged_allreduce,
     .uses_slots = true},
    {.collective = Collective::allreduce,
     .name = "single_copy",
     .description = "node-local: each rank reads its slice of every input straight from the "
                    "others (CMA), then their finished slices (large)",
     .make = make_single_copy_allreduce,
     .uses_slots = true,
     .run_here = run_single_copy_allreduce_here},
    {.collective = Collective::allreduce,
     .name = "recursive_doubling",
     .description = "log2(p) whole-vector exchanges; non-powers of two fold in first (small "
                    "messages)",
     .make = make_recursive_doubling_allreduce,
     .make_checked = make_checked_recursive_doubling_allreduce},
    {.collective = Collective::allreduce,
     .name = "rabenseifner",
     .description = "reduce-scatter by recursive halving + allgather by doubling (medium/large)",
     .make = make_rabenseifner_allreduce},
    {.collective = Collective::allreduce,
     .name = "ring",
     .description = "reduce-scatter + allgather around a ring in pipelined segments (large)",
     .make = make_ring_allreduce,
     .ring_ordered = true},
    {.collective = Collective::allreduce,
     .name = "hierarchical",
     .description = "across nodes: node allreduce, node leaders allreduce, node bcast (small, "
                    "medium)",
     .make = make_hierarchical_allreduce,
     .across_nodes = true},
    {.collective = Collective::allreduce,
     .name = "rails",
     .description = "across nodes: node reduce-scatter, slice i across nodes by local rank i, "
                    "node allgather (large)",
     .make = make_rails_allreduce,
     .across_nodes = true},
    {.collective = Collective::bcast,
     .name = "slots",
     .description = "node-local: the root publishes to its shared slot, all copy it",
     .make = make_slots_bcast,
     .uses_slots = true,
     .run_here = run_slots_bcast_here,
     .max_bytes = kSlotBytes},
    {.collective = Collective::bcast,
     .name = "single_copy",
     .description = "node-local: the root publishes where its vector lies, all copy it from "
                    "there at once (CMA)",
     .make = make_single_copy_bcast,
     .uses_slots = true,
     .run_here = run_single_copy_bcast_here},
    {.collective = Collective::bcast,
     .name = "binomial",
     .description = "binomial tree from the root, whole vector per edge; small and checked, it "
                    "rides the check",
     .make = make_binomial_bcast,
     .make_checked = make_checked_doubling_bcast,
     .checked_max_bytes = kCheckedBcastBytes},
    {.collective = Collective::bcast,
     .name = "direct",
     .description = "every member takes the whole vector from the root; with single copy each "
                    "reads it at once (node-local, large)",
     .make = make_direct_bcast},
    {.collective = Collective::bcast,
     .name = "scatter_allgather",
     .description = "root scatters 1/p to each, pieces then circle a ring (large, many ranks)",
     .make = make_scatter_allgather_bcast,
     .ring_ordered = true},
    {.collective = Collective::bcast,
     .name = "chain",
     .description = "pipelined chain from the root in segments (very large)",
     .make = make_chain_bcast,
     .ring_ordered = true},
    {.collective = Collective::bcast,
     .name = "hierarchical",
     .description = "across nodes: the root and other nodes' leaders, then each node (any size)",
     .make = make_hierarchical_bcast,
     .across_nodes = true},
    {.collective = Collective::bcast,
     .name = "rails",
     .description = "across nodes: the root's node, slice i to other nodes by local rank i, "
                    "node allgather (large)",
     .make = make_rails_bcast,
     .across_nodes = true},
};

}  // namespace

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::allreduce:
      return "allreduce";
    case Collective::bcast:
      return "bcast";
  }
  return "unknown collective";
}

std::string describe_call(Collective collective, const char* algorithm, uint64_t base_tag,
                          int ranks, uint64_t first_sequence) {
  const uint64_t number = sequence_of(base_tag) - first_sequence + 1;
  return std::string(collective_name(collective)) + " #" + std::to_string(number) + " (" +
         algorithm + ") on communicator " + std::to_string(communicator_of(base_tag)) + " of " +
         std::to_string(ranks) + " ranks";
}

std::span<const Algorithm> algorithms() {
  return kAlgorithms;
}

const Algorithm& find_algorithm(Collective collective, std::string_view name) {
  std::string choices;
  for (const Algorithm& a : kAlgorithms) {
    if (a.collective != collective) continue;
    if (a.name == name) return a;
    choices += (choices.empty() ? "" : "|") + std::string(a.name);
  }
  throw Error(Code::invalid_argument, "algorithm: no " + std::string(collective_name(collective)) +
                                          " algorithm named '" + std::string(name) + "' (" +
                                          choices + ")");
}

}  // namespace ibcoll::collectives
