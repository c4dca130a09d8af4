// IBCOLL_CALIBRATION_PRETEND: each outcome's times, put through the decisions the calibrations
// make (single_copy_sizes, slots_allreduce_max, single_copy_allreduce_from), give exactly that
// outcome at the sizes the calibrations measure.
#include <gtest/gtest.h>

#include "runtime/calibration_pretend.h"
#include "runtime/node_calibration.h"

namespace ibcoll::runtime {
namespace {

using P = CalibrationPretend;
using transport::shm::SingleCopySizes;

const std::span<const size_t> kSmall = slots_calibration_sizes();
const std::span<const size_t> kLarge = single_copy_allreduce_calibration_sizes();

TEST(CalibrationPretend, ParsesEachKeyAndKeepsTheText) {
  EXPECT_FALSE(parse_calibration_pretend("").any());
  const P p =
      parse_calibration_pretend("single_copy=window,slots=late,allreduce_single_copy=never");
  EXPECT_TRUE(p.any());
  EXPECT_EQ(p.single_copy, P::SingleCopy::window);
  EXPECT_EQ(p.slots, P::Slots::late);
  EXPECT_EQ(p.allreduce_single_copy, P::AllreduceSingleCopy::never);
  EXPECT_EQ(p.text, "single_copy=window,slots=late,allreduce_single_copy=never");
  const P one = parse_calibration_pretend("slots=early");
  EXPECT_EQ(one.single_copy, P::SingleCopy::measured);
  EXPECT_EQ(one.slots, P::Slots::early);
}

TEST(CalibrationPretend, SingleCopyOutcomes) {
  const auto sizes = transport::shm::single_copy_calibration_sizes();
  auto decided = [&](P::SingleCopy outcome) {
    return transport::shm::single_copy_sizes(pretended_copy_times(outcome, sizes));
  };
  EXPECT_EQ(decided(P::SingleCopy::wins), (SingleCopySizes{sizes.front()}));
  EXPECT_EQ(decided(P::SingleCopy::window), (SingleCopySizes{64 << 10, 2 << 20}));
  EXPECT_EQ(decided(P::SingleCopy::loses), SingleCopySizes{});
}

TEST(CalibrationPretend, TheVerdictSaysLosesOrDoesNotWork) {
  const auto sizes = transport::shm::single_copy_calibration_sizes();
  const auto lost = transport::shm::single_copy_verdict(
      {pretended_copy_times(P::SingleCopy::loses, sizes), false, 1.0});
  EXPECT_EQ(lost.sizes, SingleCopySizes{});
  EXPECT_NE(lost.summary.find("single copy loses to the rings here"), std::string::npos)
      << lost.summary;
  const auto refused = transport::shm::single_copy_verdict(
      {pretended_copy_times(P::SingleCopy::wins, sizes), true, 1.0});
  EXPECT_EQ(refused.sizes, SingleCopySizes{});
  EXPECT_NE(refused.summary.find("does not work here"), std::string::npos) << refused.summary;
  const auto won = transport::shm::single_copy_verdict(
      {pretended_copy_times(P::SingleCopy::wins, sizes), false, 1.0});
  EXPECT_EQ(won.summary.find("loses"), std::string::npos) << won.summary;
}

TEST(CalibrationPretend, SlotsEndEarlyOrLate) {
  EXPECT_EQ(collectives::slots_allreduce_max(pretended_slots_times(P::Slots::early, kSmall)),
            kSmall.front() / 2);
  EXPECT_EQ(collectives::slots_allreduce_max(pretended_slots_times(P::Slots::late, kSmall)),
            size_t{32} << 10);
}

TEST(CalibrationPretend, SingleCopyAllreduceEarlyLateOrNever) {
  auto from = [](P::AllreduceSingleCopy outcome) {
    return collectives::single_copy_allreduce_from(
        pretended_single_copy_allreduce_times(outcome, kLarge));
  };
  EXPECT_EQ(from(P::AllreduceSingleCopy::early), kLarge.front());
  EXPECT_EQ(from(P::AllreduceSingleCopy::late), size_t{1} << 20);
  EXPECT_EQ(from(P::AllreduceSingleCopy::never), 0u);
}

}  // namespace
}  // namespace ibcoll::runtime
