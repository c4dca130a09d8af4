// The node's allreduce thresholds (collectives/tuning.h), measured at start-up by running the
// candidates on a communicator of the node's ranks: slots against staged from 256 B to 32 KiB,
// then staged against single copy from 256 KiB up, while the time spent stays under a bound.
// Every rank takes the slowest rank's best time of each point (an allreduce of the times), so
// all decide alike. A few ms of calls on 2 ranks.
#pragma once

#include <span>
#include <string>

#include "collectives/tuning.h"
#include "runtime/calibration_pretend.h"
#include "runtime/context.h"

namespace ibcoll::runtime {

struct NodeCalibration {
  collectives::NodeTuning tuning;  // the measured thresholds; the others as they came in
  std::string slots_summary;       // what was measured, in words; empty where nothing was
  std::string single_copy_summary;
};

// Collective over `node` (the node's ranks, slots and no call check; the calibration's own,
// left with whatever it forced last): measures what `measure_slots` / `measure_single_copy`
// ask for and keeps `tuning`'s other thresholds. Where the node's single copy does not work,
// single copy is off (0) and not measured. What `pretend` sets is decided from its times
// instead of measured.
// The sizes measured, ascending: slots against staged; staged against single copy (the larger
// ones only while the time spent stays under the bound).
std::span<const size_t> slots_calibration_sizes();
std::span<const size_t> single_copy_allreduce_calibration_sizes();

NodeCalibration calibrate_node(Context& context, collectives::Communicator& node,
                               collectives::NodeTuning tuning, bool measure_slots,
                               bool measure_single_copy, const CalibrationPretend& pretend);

}  // namespace ibcoll::runtime
