// The node-local allreduce thresholds the machine decides (collectives/tuning.h): measured by
// the node's ranks at start-up, alike on every rank, in force on the node's communicators, and
// taken as set where a variable sets them. The algorithms they choose between all fold in
// member order, so the measured choice, which may differ from run to run, never changes bits.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

// The value and origin of VARIABLE in ibcoll_thresholds' "VARIABLE=value (origin)" lines.
struct Threshold {
  size_t bytes = 0;
  std::string origin;
};

Threshold threshold(ibcoll_context_t context, const std::string& variable) {
  const std::string text = ibcoll_thresholds(context);
  const size_t at = text.find(variable + "=");
  RANK_CHECK(at != std::string::npos, variable + " is not among the thresholds: " + text);
  const std::string line = text.substr(at, text.find('\n', at) - at);
  const size_t value = at + variable.size() + 1;
  char* end = nullptr;
  Threshold t{std::strtoull(text.c_str() + value, &end, 10), ""};
  if (*end == 'K') t.bytes <<= 10, ++end;
  if (*end == 'M') t.bytes <<= 20, ++end;
  const size_t open = line.find(" (");
  RANK_CHECK(open != std::string::npos && line.back() == ')', "no origin: " + line);
  t.origin = line.substr(open + 2, line.size() - open - 3);
  return t;
}

std::string allreduce_algorithm(ibcoll_comm_t comm, size_t bytes) {
  return ibcoll_algorithm(comm, IBCOLL_ALLREDUCE, bytes, IBCOLL_UINT8);
}

// The cpus this process may run on: forked ranks share them, so the node's.
int cpus_here() {
  cpu_set_t set;
  RANK_CHECK(sched_getaffinity(0, sizeof(set), &set) == 0, "sched_getaffinity failed");
  return CPU_COUNT(&set);
}

// Whether the IBCOLL_CALIBRATION_PRETEND this suite runs under (ci/test runs it under several)
// sets `key`'s outcome.
bool pretends(const std::string& key) {
  const char* pretend = std::getenv("IBCOLL_CALIBRATION_PRETEND");
  return pretend && ("," + std::string(pretend)).find("," + key + "=") != std::string::npos;
}

// With no variable set, the node's ranks measure both thresholds at start-up, all run with the
// same values, and the choice follows them exactly: the slots up to their largest size and
// staged right above it; single copy from its size (where it won) and staged right below. On a
// node with more ranks than cpus nothing is measured (the times would be the scheduler's; what
// a test pretends is decided), and no single copy allreduce runs. Here 2 ranks are measured and
// 3 (on 2 cores) are not. Every verdict a machine may give passes: where the node's messages are
// not read by single copy (it lost to the rings, or the kernel refused it), the single-copy
// allreduce is not measured and says which, in the words of the node's own verdict.
TEST(NodeCalibration, ThresholdsAreMeasuredAtStartAgreedAcrossTheNodeAndInForce) {
  for (int ranks : {2, 3}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_all_ok(run_ranks(ranks, [](int, int n) {
      CapiRank r;
      const std::string text = ibcoll_thresholds(r.context());
      expect_same_everywhere(r.world(), text.data(), text.size(), "the thresholds");
      const Threshold node = threshold(r.context(), "IBCOLL_SHM_SINGLE_COPY");
      const Threshold slots = threshold(r.context(), "IBCOLL_ALLREDUCE_SLOTS_MAX");
      const Threshold single = threshold(r.context(), "IBCOLL_ALLREDUCE_SINGLE_COPY_FROM");
      RANK_CHECK(allreduce_algorithm(r.world(), slots.bytes) == "slots" &&
                     allreduce_algorithm(r.world(), slots.bytes + 1) == "staged",
                 "the slots do not end at " + std::to_string(slots.bytes));
      const bool node_single_copy_off = node.bytes == 0;
      const bool does_not_work = node.origin.find("does not work here") != std::string::npos;
      if (node_single_copy_off) {
        RANK_CHECK(does_not_work ||
                       node.origin.find("single copy loses to the rings here") != std::string::npos,
                   "the node's single copy is off and says neither why: " + node.origin);
      }
      const bool oversubscribed = n > cpus_here();
      const std::string unmeasured =
          "unmeasured: " + std::to_string(n) + " ranks on " + std::to_string(cpus_here()) + " cpus";
      const std::string measured =
          "measured at start-up on the node's " + std::to_string(n) + " ranks";
      if (oversubscribed && !pretends("slots")) {
        RANK_CHECK(slots.origin == unmeasured, slots.origin);
      } else {
        RANK_CHECK(slots.origin.rfind(measured + ", us per call slots / staged: 256 ", 0) == 0,
                   slots.origin);
      }
      if (oversubscribed && !pretends("allreduce_single_copy")) {
        RANK_CHECK(single.origin == unmeasured && single.bytes == 0,
                   "single copy is on where nothing measured it: " + single.origin);
      } else if (node_single_copy_off) {
        const std::string why = does_not_work ? "unused: single copy does not work here"
                                              : "unused: single copy loses to the rings here";
        RANK_CHECK(single.origin == why && single.bytes == 0, single.origin);
      } else {
        RANK_CHECK(
            single.origin.rfind(measured + ", us per call staged / single_copy: 256K ", 0) == 0,
            single.origin);
        RANK_CHECK(
            (single.bytes == 0) ==
                (single.origin.find("single copy loses to staged here") != std::string::npos),
            "a single-copy allreduce that never runs says so, and only then: " + single.origin);
      }
      if (single.bytes == 0) {
        RANK_CHECK(allreduce_algorithm(r.world(), size_t{1} << 30) == "staged",
                   "single copy runs where it is off");
      } else {
        RANK_CHECK(allreduce_algorithm(r.world(), single.bytes) == "single_copy" &&
                       allreduce_algorithm(r.world(), single.bytes - 1) == "staged",
                   "single copy does not start at " + std::to_string(single.bytes));
      }
      return 0;
    }));
  }
}

// Set by the variables, the thresholds are taken as set, said so, and nothing is measured.
TEST(NodeCalibration, ThresholdsSetByVariablesAreTakenAsSet) {
  RankOptions options;
  options.environment = {{"IBCOLL_ALLREDUCE_SLOTS_MAX", "8K"},
                         {"IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", "512K"},
                         {"IBCOLL_SHM_SINGLE_COPY", "16K"}};
  expect_all_ok(run_ranks(
      3,
      [](int, int) {
        CapiRank r;
        const Threshold slots = threshold(r.context(), "IBCOLL_ALLREDUCE_SLOTS_MAX");
        const Threshold single = threshold(r.context(), "IBCOLL_ALLREDUCE_SINGLE_COPY_FROM");
        RANK_CHECK(slots.bytes == (8 << 10) && slots.origin == "IBCOLL_ALLREDUCE_SLOTS_MAX",
                   slots.origin);
        RANK_CHECK(
            single.bytes == (512 << 10) && single.origin == "IBCOLL_ALLREDUCE_SINGLE_COPY_FROM",
            single.origin);
        RANK_CHECK(allreduce_algorithm(r.world(), 8 << 10) == "slots" &&
                       allreduce_algorithm(r.world(), (8 << 10) + 1) == "staged" &&
                       allreduce_algorithm(r.world(), (512 << 10) - 1) == "staged" &&
                       allreduce_algorithm(r.world(), 512 << 10) == "single_copy",
                   "the choice does not follow the variables");
        return 0;
      },
      options));
}

// Every node-local allreduce the thresholds choose between (slots, staged, single copy) gives
// the bits of the inputs folded one after the other in member order, so which one a run
// measured faster changes no result. The sizes fit every one of them.
TEST(NodeCalibration, TheAlgorithmsTheThresholdsChooseBetweenFoldInMemberOrder) {
  for (const char* algorithm : {"slots", "staged", "single_copy"}) {
    SCOPED_TRACE(algorithm);
    RankOptions options;
    options.environment = {{"IBCOLL_ALLREDUCE_ALGO", algorithm}, {"IBCOLL_SHM_SINGLE_COPY", "4K"}};
    expect_all_ok(run_ranks(
        3,
        [algorithm](int me, int n) {
          CapiRank r;
          for (size_t count : {size_t{1}, size_t{1000}, size_t{8192}}) {
            std::vector<float> want = rounding_input(0, count);
            for (int rank = 1; rank < n; ++rank) {
              const std::vector<float> x = rounding_input(rank, count);
              for (size_t i = 0; i < count; ++i)
                want[i] += x[i];
            }
            expect_algorithm(r.world(), IBCOLL_ALLREDUCE, count, IBCOLL_FLOAT32, algorithm);
            const std::vector<float> mine = rounding_input(me, count);
            std::vector<float> got(count);
            RANK_CHECK(ibcoll_allreduce(mine.data(), got.data(), count, IBCOLL_FLOAT32, IBCOLL_SUM,
                                        r.world()) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
            RANK_CHECK(std::memcmp(got.data(), want.data(), count * sizeof(float)) == 0,
                       std::to_string(count) + " floats: not the member-order fold's bits");
          }
          return 0;
        },
        options));
  }
}

}  // namespace
}  // namespace ibcoll::testing
