#include "collectives/registry.h"

#include <limits>
#include <string>

#include "collectives/allreduce/rabenseifner.h"
#include "collectives/allreduce/recursive_doubling.h"
#include "collectives/allreduce/ring.h"
#include "collectives/allreduce/slots.h"
#include "collectives/allreduce/staged.h"
#include "collectives/bcast/binomial.h"
#include "collectives/bcast/chain.h"
#include "collectives/bcast/doubling.h"
#include "collectives/bcast/scatter_allgather.h"
#include "collectives/bcast/slots.h"
#include "collectives/tags.h"
#include "transport/shm/slot_region.h"

namespace ibcoll::collectives {
namespace {

constexpr size_t kSlotBytes = transport::shm::SlotRegion::kDataBytes;
constexpr size_t kNoLimit = std::numeric_limits<size_t>::max();
// The checked bcast passes the vector through scratch twice; above this, a separate check's
// round costs less than those copies.
constexpr size_t kCheckedBcastBytes = 8 << 10;

const Algorithm kAlgorithms[] = {
    {Collective::allreduce, "slots",
     "node-local: each rank publishes to its shared slot, all fold the slots in rank order",
     make_slots_allreduce, true, nullptr, run_slots_allreduce_here, kSlotBytes},
    {Collective::allreduce, "staged",
     "node-local: chunks through shared halves, each rank reduces its part from all (large)",
     make_staged_allreduce, true},
    {Collective::allreduce, "recursive_doubling",
     "log2(p) whole-vector exchanges; non-powers of two fold in first (small messages)",
     make_recursive_doubling_allreduce, false, make_checked_recursive_doubling_allreduce},
    {Collective::allreduce, "rabenseifner",
     "reduce-scatter by recursive halving + allgather by doubling (medium/large)",
     make_rabenseifner_allreduce},
    {Collective::allreduce, "ring",
     "reduce-scatter + allgather around a ring in pipelined segments (large)", make_ring_allreduce,
     false, nullptr, nullptr, kNoLimit, kNoLimit, true},
    {Collective::bcast, "slots", "node-local: the root publishes to its shared slot, all copy it",
     make_slots_bcast, true, nullptr, run_slots_bcast_here, kSlotBytes},
    {Collective::bcast, "binomial",
     "binomial tree from the root, whole vector per edge; small and checked, it rides the check",
     make_binomial_bcast, false, make_checked_doubling_bcast, nullptr, kNoLimit,
     kCheckedBcastBytes},
    {Collective::bcast, "scatter_allgather",
     "root scatters 1/p to each, pieces then circle a ring (large, many ranks)",
     make_scatter_allgather_bcast, false, nullptr, nullptr, kNoLimit, kNoLimit, true},
    {Collective::bcast, "chain", "pipelined chain from the root in segments (very large)",
     make_chain_bcast, false, nullptr, nullptr, kNoLimit, kNoLimit, true},
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
                          int ranks) {
  return std::string(collective_name(collective)) + " #" + std::to_string(sequence_of(base_tag)) +
         " (" + algorithm + ") on communicator " + std::to_string(communicator_of(base_tag)) +
         " of " + std::to_string(ranks) + " ranks";
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
