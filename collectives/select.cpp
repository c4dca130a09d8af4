#include "collectives/select.h"

#include <limits>
#include <vector>

#include "transport/shm/slot_region.h"

namespace ibcoll::collectives {
namespace {

// The first row of a collective whose limits hold (and whose algorithm can run) wins; the
// last row of each has no limits.
struct Rule {
  Collective collective;
  size_t max_bytes;  // per rank
  int min_ranks;
  const char* algorithm;
  // Only for groups across nodes where some node holds several members (a group with one
  // member per node gains nothing from hierarchy).
  bool across_shared_nodes = false;
  bool checked_only = false;  // only for checked calls
  // Only for sizes the group's members read straight from each other: inside the node's
  // single-copy window, or from its lower end up; or wherever the node's single copy works.
  enum class SingleCopy { any, inside, from, works } single_copy = SingleCopy::any;
  // Bounds the node measured (tuning.h), in place of max_bytes and of none below; a tuned
  // lower bound of 0 means never.
  size_t NodeTuning::*tuned_max = nullptr;
  size_t NodeTuning::*tuned_min = nullptr;
};

constexpr size_t kAny = std::numeric_limits<size_t>::max();
constexpr size_t kSlotBytes = transport::shm::SlotRegion::kDataBytes;

const Rule kRules[] = {
    // Across nodes, a checked call runs the call check over every member first, by recursive
    // doubling over the network, whatever the algorithm. Up to 8 KiB the flat algorithm that is
    // its own check carries the data in the check's messages: one network pass, where the
    // hierarchy adds its leaders' pass to the check's. Measured on 2 + 2 ranks across guests,
    // 8 B..4 KiB: allreduce 1.8-3.0 ms vs 3.3-4.6 hierarchical, bcast 1.7-3.1 vs 2.1-3.8; they
    // meet at 8-16 KiB.
    {Collective::allreduce, 8 << 10, 1, "recursive_doubling", true, true},
    {Collective::bcast, 8 << 10, 1, "binomial", true, true},
    // Across nodes: one member per node on the network for small vectors; for large ones every
    // member carries its slice over its own connection (the network is the bottleneck; the
    // node's extra pass is not). Measured on 2 + 2 ranks across guests: rails from 128 KiB.
    {Collective::allreduce, 64 << 10, 1, "hierarchical", true},
    {Collective::allreduce, kAny, 1, "rails", true},
    {Collective::bcast, 64 << 10, 1, "hierarchical", true},
    {Collective::bcast, kAny, 1, "rails", true},
    // Up to a size the node measures (about 2 KiB on the first 2-core machine), every rank
    // reads every member's whole vector; above it that costs more than staged's three
    // handshakes per chunk, where each rank reduces only its part.
    {.collective = Collective::allreduce,
     .max_bytes = kAny,
     .min_ranks = 1,
     .algorithm = "slots",
     .tuned_max = &NodeTuning::slots_allreduce_max},
    // Where the node's single copy works, from a size the node measures: each member reads its
    // part of the others' inputs and then their finished parts straight from their processes,
    // 2.5 N of memory traffic at 2 ranks against staged's 4 N. On the first 2-core machine it
    // won from 1 MiB at 2 ranks (the kernel's copy pins every page it reads, and each chunk
    // makes p - 1 reads where staged makes one copy in) and lost at 4 ranks on 2 cores.
    {.collective = Collective::allreduce,
     .max_bytes = kAny,
     .min_ranks = 2,
     .algorithm = "single_copy",
     .single_copy = Rule::SingleCopy::works,
     .tuned_min = &NodeTuning::single_copy_allreduce_from},
    {Collective::allreduce, kAny, 1, "staged"},
    {Collective::allreduce, 16 << 10, 1, "recursive_doubling"},
    // Above this its exchanges outgrow a shared-memory ring (256 KiB): ranks that share a core
    // then hand the core back and forth several times per message. The ring's segments fit.
    {Collective::allreduce, 256 << 10, 1, "rabenseifner"},
    {Collective::allreduce, kAny, 3, "ring"},
    {Collective::allreduce, kAny, 1, "rabenseifner"},
    // Sizes the node's single copy takes (measured at start-up between two ranks): one copy per
    // receiver from the root's buffer, where the slots make two (root in, receiver out). The
    // window's upper end is where the rings' two copies, one per core at once, win again over
    // one core's copy; from 4 ranks a bcast's receivers copy on as many cores at once while the
    // ring bcasts double the traffic, so single copy goes on above it (4 ranks on 2 cores here:
    // 8 MiB 0.73-0.79x Open MPI against 0.84-1.07x by scatter_allgather, 16 MiB 0.54-0.59x
    // against 0.75-1.13x by chain).
    {Collective::bcast, kAny, 4, "single_copy", false, false, Rule::SingleCopy::from},
    {Collective::bcast, kAny, 1, "single_copy", false, false, Rule::SingleCopy::inside},
    {Collective::bcast, kSlotBytes, 1, "slots"},
    // The same without the slots: by messages, the members all read the root's buffer at once,
    // where binomial makes log2(p) copies in a row and scatter / allgather two per member. (At
    // 2 ranks binomial is the same thing.)
    {Collective::bcast, kAny, 4, "direct", false, false, Rule::SingleCopy::from},
    {Collective::bcast, kAny, 3, "direct", false, false, Rule::SingleCopy::inside},
    {Collective::bcast, 512 << 10, 1, "binomial"},
    {Collective::bcast, 8 << 20, 3, "scatter_allgather"},
    {Collective::bcast, kAny, 4, "chain"},
    {Collective::bcast, kAny, 3, "scatter_allgather"},
    {Collective::bcast, kAny, 1, "binomial"},
};

// The rule's algorithm, looked up by name once (selection runs on every call).
const Algorithm& resolved(const Rule& rule) {
  static const auto table = [] {
    std::vector<const Algorithm*> out;
    for (const Rule& r : kRules)
      out.push_back(&find_algorithm(r.collective, r.algorithm));
    return out;
  }();
  return *table[static_cast<size_t>(&rule - kRules)];
}

bool can_run(const Algorithm& a, size_t bytes, const GroupShape& shape) {
  return (!a.uses_slots || shape.slots) && (!a.across_nodes || shape.nodes > 1) &&
         bytes <= a.max_bytes;
}

bool single_copy_allows(const Rule& rule, size_t bytes, const transport::shm::SingleCopySizes& s) {
  switch (rule.single_copy) {
    case Rule::SingleCopy::any:
      return true;
    case Rule::SingleCopy::inside:
      return s.holds(bytes);
    case Rule::SingleCopy::from:
      return s.from != 0 && bytes >= s.from;
    case Rule::SingleCopy::works:
      return s.from != 0;
  }
  return false;
}

bool tuned_from(size_t from, size_t bytes) {
  return from != 0 && bytes >= from;
}

}  // namespace

const Algorithm& select_algorithm(Collective collective, size_t bytes, const GroupShape& shape,
                                  std::string_view forced) {
  if (!forced.empty() && forced != "auto") {
    const Algorithm& chosen = find_algorithm(collective, forced);
    if (can_run(chosen, bytes, shape)) return chosen;  // else: the table's choice
  }
  const bool shared_nodes = shape.nodes > 1 && shape.nodes < shape.ranks;
  for (const Rule& rule : kRules) {
    if (rule.collective != collective || bytes > rule.max_bytes ||
        (rule.tuned_max && bytes > shape.tuning.*rule.tuned_max) ||
        (rule.tuned_min && !tuned_from(shape.tuning.*rule.tuned_min, bytes)) ||
        shape.ranks < rule.min_ranks || (rule.across_shared_nodes && !shared_nodes) ||
        (rule.checked_only && !shape.checked) ||
        !single_copy_allows(rule, bytes, shape.single_copy)) {
      continue;
    }
    const Algorithm& a = resolved(rule);
    if (can_run(a, bytes, shape)) return a;
  }
  throw Error(Code::internal,
              std::string("no default algorithm for ") + collective_name(collective));
}

}  // namespace ibcoll::collectives
