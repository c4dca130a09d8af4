// The algorithm table: every collective algorithm with its name and a one-line description,
// the one place selection (select.h) and IBCOLL_ALLREDUCE_ALGO / IBCOLL_BCAST_ALGO look.
#pragma once

#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

const char* collective_name(Collective collective);
// "allreduce #123 (ring) on communicator 5 of 8 ranks": a call, numbered by its first sequence
// number from the communicator's first (`first_sequence`: #1; a call across nodes takes several),
// for errors and reports.
std::string describe_call(Collective collective, const char* algorithm, uint64_t base_tag,
                          int ranks, uint64_t first_sequence);

struct Algorithm {
  Collective collective;
  const char* name;
  const char* description;
  std::unique_ptr<CollectiveTask> (*make)(Group group, CollectiveArgs args, uint64_t base_tag);
  // Runs in the node's slot region: needs Group::slots, and checks the call itself.
  bool uses_slots = false;
  // A variant that is also the call check by messages (its shape and steps are the check's),
  // used where calls are checked and there are no slots, for calls of at most
  // `checked_max_bytes` per rank (above, the check runs first, then make). Null if none.
  std::unique_ptr<CollectiveTask> (*make_checked)(Group group, CollectiveArgs args,
                                                  uint64_t base_tag,
                                                  const CallSignature& signature) = nullptr;
  // Runs a blocking call to its end on the caller's stack, allocating nothing; for the slot
  // algorithms, whose calls complete by reading memory. Null if none.
  Status (*run_here)(const Group& group, const CollectiveArgs& args, uint64_t base_tag,
                     WaitUntil wait) = nullptr;
  size_t max_bytes = std::numeric_limits<size_t>::max();  // per rank
  size_t checked_max_bytes = std::numeric_limits<size_t>::max();
  // Passes data around a ring or chain of the members: run in the communicator's ring order
  // (node by node, packages together; topo::Hierarchy) so it crosses each boundary once.
  bool ring_ordered = false;
  // Made of flat calls on the members' subgroups by node (Group::layout): runs only on a
  // group whose members span nodes.
  bool across_nodes = false;
};

std::span<const Algorithm> algorithms();
// The algorithm named `name` for `collective`; Error(invalid_argument) naming the choices.
const Algorithm& find_algorithm(Collective collective, std::string_view name);

}  // namespace ibcoll::collectives
