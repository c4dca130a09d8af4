// For tests: IBCOLL_CALIBRATION_PRETEND replaces what the start-up calibrations measure with
// times that give a chosen outcome, so that a suite runs as it would on a machine where single
// copy wins, loses, wins in a window or does not work, and where the slots end early or late.
// Everything after the measurement (the decision, its agreement across the node, its wording,
// the algorithms chosen) runs as on such a machine; a refusal the kernel really gave stays.
// Tests must pass under every outcome: thresholds come from the machine, and so must what the
// tests expect.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "collectives/tuning.h"
#include "transport/shm/single_copy_calibration.h"

namespace ibcoll::runtime {

struct CalibrationPretend {
  // Node-local messages read from the sender: from the smallest size up; in a window
  // (64 KiB up to 2 MiB); at no size (the rings win everywhere); refused by the kernel.
  enum class SingleCopy {
    measured,
    wins,
    window,
    loses,
    refused
  } single_copy = SingleCopy::measured;
  // The slots' allreduce hands over to staged below the smallest size measured, or only above
  // the largest (their buffer's 32 KiB).
  enum class Slots { measured, early, late } slots = Slots::measured;
  // The single-copy allreduce runs from the smallest size measured, from 1 MiB, or never
  // (where the node's single copy works at all).
  enum class AllreduceSingleCopy {
    measured,
    early,
    late,
    never
  } allreduce_single_copy = AllreduceSingleCopy::measured;
  std::string text;  // as set; empty: every calibration as measured

  bool any() const { return !text.empty(); }
};

// What a summary of pretended times ends with: "; pretended by IBCOLL_CALIBRATION_PRETEND=...".
std::string pretended_note(const CalibrationPretend& pretend);

// "KEY=OUTCOME,..." with keys single_copy (wins|window|loses|refused), slots (early|late) and
// allreduce_single_copy (early|late|never); Error(invalid_argument) naming the variable.
CalibrationPretend parse_calibration_pretend(const std::string& text);

// Times at `sizes` (ascending) that give the outcome, for an outcome other than measured.
std::vector<transport::shm::CopyTimes> pretended_copy_times(CalibrationPretend::SingleCopy outcome,
                                                            std::span<const size_t> sizes);
std::vector<collectives::PairTimes> pretended_slots_times(CalibrationPretend::Slots outcome,
                                                          std::span<const size_t> sizes);
std::vector<collectives::PairTimes> pretended_single_copy_allreduce_times(
    CalibrationPretend::AllreduceSingleCopy outcome, std::span<const size_t> sizes);

}  // namespace ibcoll::runtime
