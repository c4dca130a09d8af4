// The thresholds of node-local allreduce that the machine decides: where the slots (every rank
// folds every member's whole vector) hand over to staged (each rank reduces its part through
// the staging halves), and from what size the members read each other's inputs straight from
// their processes (single copy) instead. Measured on the node's ranks at start-up
// (runtime/node_calibration.h) unless IBCOLL_ALLREDUCE_SLOTS_MAX /
// IBCOLL_ALLREDUCE_SINGLE_COPY_FROM set them; alike on every rank of a node. The algorithms
// all fold in member order, so the choice changes the time and never the bits.
#pragma once

#include <cstddef>
#include <span>

namespace ibcoll::collectives {

struct NodeTuning {
  // Unmeasured (a node without slots, where neither runs): the values measured on the first
  // 2-core machine.
  size_t slots_allreduce_max = 2 << 10;         // bytes per rank; larger ones run staged
  size_t single_copy_allreduce_from = 1 << 20;  // 0: never
  bool operator==(const NodeTuning&) const = default;
};

// Times of one call of `bytes` per rank by two algorithms, the one in use below the threshold
// (`below`) and its successor (`above`).
struct PairTimes {
  size_t bytes;
  double below_ns, above_ns;
};

// Each handover is the one that makes the measured sizes' summed relative time least: a single
// slow point moves it by one size at most, where the first loss or win alone would let one
// outlier decide. The relative time at a size is the successor's time over the other's.

// The slots' largest size from times at ascending sizes: the end of the prefix of sizes over
// which staged's relative time sums highest (a tie ends it); half the first size where
// no prefix gains (sizes below those measured stay with the slots).
size_t slots_allreduce_max(std::span<const PairTimes> slots_then_staged);

// The size from which single copy runs: the start of the suffix over which its relative time
// sums lowest, where that is at most 97% on average; 0 (never) where no suffix is. Nothing
// says how it does beyond the largest size measured, so the suffix runs to it.
size_t single_copy_allreduce_from(std::span<const PairTimes> staged_then_single_copy);

}  // namespace ibcoll::collectives
