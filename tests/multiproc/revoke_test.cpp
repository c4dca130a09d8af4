// Revoking a communicator (ibcoll_comm_revoke) between forked ranks: the calls its members have
// in flight on it and every later one fail with IBCOLL_ERR_REVOKED within seconds, naming the
// rank that revoked it, whatever the algorithm (slot calls that run on the caller's stack, calls
// by messages, a test-polled request, a hierarchical call between two pretend nodes), also on
// members the revoking rank does not tell itself; other communicators of the same ranks go on.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void expect_revoked(ibcoll_status_t status, const std::string& by, const std::string& what) {
  RANK_CHECK(status == IBCOLL_ERR_REVOKED,
             what + ": got " + ibcoll_status_name(status) + " (" + ibcoll_last_error() + ")");
  RANK_CHECK(
      std::string(ibcoll_last_error()).find("revoked by " + by) != std::string::npos,
      what + ": the message does not say it was revoked by " + by + ": " + ibcoll_last_error());
}

struct RevokeCase {
  const char* name;
  const char* algorithm;   // forced: IBCOLL_ALLREDUCE_ALGO
  size_t count;            // floats
  bool test_polled;        // ibcoll_iallreduce, then ibcoll_test until it ends
  const char* slots;       // IBCOLL_SHM_SLOTS: "0" checks calls by messages, not in the slots
  bool two_nodes = false;  // ranks 0-3 and 4-7 on two pretend nodes (UCX's tcp on the host)
};

class Revoke : public ::testing::TestWithParam<RevokeCase> {};

// 8 ranks: 1..7 start an allreduce on the world that rank 0 never joins; rank 0 revokes the
// world 300 ms later. Rank 0 tells ranks 1, 2, 4, 6 and 7 itself; 3 and 5 hear it from them.
TEST_P(Revoke, CallsInFlightAndLaterFailOnEveryMember) {
  const RevokeCase c = GetParam();
  const char* transport = std::getenv("IBCOLL_TRANSPORT");
#if !defined(IBCOLL_HAVE_UCX)
  if (c.two_nodes && !transport) GTEST_SKIP() << "no UCX in this build between pretend nodes";
#endif
  RankOptions options;
  options.environment = {{"IBCOLL_ALLREDUCE_ALGO", c.algorithm},
                         {"IBCOLL_SHM_SLOTS", c.slots},
                         {"IBCOLL_TIMEOUT", "60s"}};
  if (c.two_nodes && !transport && !std::getenv("UCX_TLS")) options.environment["UCX_TLS"] = "tcp";
  constexpr int kRanks = 8;
  const std::vector<RankExit> exits = run_ranks(
      kRanks,
      [c](int me, int n) {
        if (c.two_nodes) setenv("IBCOLL_NODE", me < n / 2 ? "revoke-node-0" : "revoke-node-1", 1);
        CapiRank r;
        const ibcoll_comm_t world = r.world();
        expect_forced_algorithm(world, IBCOLL_ALLREDUCE, c.count, DataType::float32);
        std::vector<float> data(c.count, 1.0f), out(c.count, -1.0f);
        if (me == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          RANK_CHECK(ibcoll_comm_revoke(world) == IBCOLL_SUCCESS, ibcoll_last_error());
          RANK_CHECK(ibcoll_comm_revoke(world) == IBCOLL_SUCCESS, "a second revoke");
          expect_revoked(
              ibcoll_allreduce(data.data(), out.data(), c.count, IBCOLL_FLOAT32, IBCOLL_SUM, world),
              "this rank", "rank 0's call after its revoke");
        } else {
          const Clock::time_point start = Clock::now();
          ibcoll_status_t status;
          if (c.test_polled) {
            ibcoll_request_t request = nullptr;
            RANK_CHECK(ibcoll_iallreduce(data.data(), out.data(), c.count, IBCOLL_FLOAT32,
                                         IBCOLL_SUM, world, &request) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
            int done = 0;
            do {
              status = ibcoll_test(request, &done);
            } while (status == IBCOLL_SUCCESS && !done);
            ibcoll_request_free(&request);
          } else {
            status = ibcoll_allreduce(data.data(), out.data(), c.count, IBCOLL_FLOAT32, IBCOLL_SUM,
                                      world);
          }
          const double waited = seconds_since(start);
          expect_revoked(status, "job rank 0", "rank " + std::to_string(me) + "'s call in flight");
          RANK_CHECK(waited < 5.0,
                     "the call in flight failed only after " + std::to_string(waited) + " s");
          const Clock::time_point later = Clock::now();
          expect_revoked(ibcoll_bcast(data.data(), c.count, IBCOLL_FLOAT32, 0, world), "job rank 0",
                         "a later call");
          RANK_CHECK(seconds_since(later) < 0.5, "a later call did not fail at once");
        }
        // The world is revoked: the ranks meet outside ibcoll before finalizing.
        std::vector<int> everyone(static_cast<size_t>(n));
        for (int i = 0; i < n; ++i)
          everyone[static_cast<size_t>(i)] = i;
        meet_without_ibcoll(std::string("revoke-") + c.name, me, everyone);
        return 0;
      },
      options);
  std::vector<int> everyone(kRanks);
  for (int i = 0; i < kRanks; ++i)
    everyone[static_cast<size_t>(i)] = i;
  meeting_over(std::string("revoke-") + c.name, everyone);
  expect_all_ok(exits);
}

INSTANTIATE_TEST_SUITE_P(
    Algorithms, Revoke,
    ::testing::Values(RevokeCase{"slots", "slots", 16, false, "1"},
                      RevokeCase{"single_copy", "single_copy", 256 * 1024, false, "1"},
                      RevokeCase{"ring", "ring", 64 * 1024, false, "1"},
                      RevokeCase{"ring_by_messages", "ring", 64 * 1024, false, "0"},
                      RevokeCase{"recursive_doubling_polled", "recursive_doubling", 64, true, "0"},
                      RevokeCase{"hierarchical_two_nodes", "hierarchical", 64 * 1024, false, "1",
                                 true}),
    [](const ::testing::TestParamInfo<RevokeCase>& param) {
      return std::string(param.param.name);
    });

// 6 ranks split into evens and odds; rank 0 revokes the evens' communicator before any call on
// it: ranks 2 and 4 fail there, while the odds' communicator and the world go on, right.
TEST(RevokeOne, OtherCommunicatorsOfTheSameRanksGoOn) {
  expect_all_ok(run_ranks(6, [](int me, int n) {
    CapiRank r;
    ibcoll_comm_t half = nullptr;
    RANK_CHECK(ibcoll_comm_split(r.world(), me % 2, me, &half) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    std::vector<float> data(1024, static_cast<float>(me + 1)), out(1024, 0.0f);
    if (me == 0) RANK_CHECK(ibcoll_comm_revoke(half) == IBCOLL_SUCCESS, ibcoll_last_error());
    if (me % 2 == 0) {
      expect_revoked(
          ibcoll_allreduce(data.data(), out.data(), data.size(), IBCOLL_FLOAT32, IBCOLL_SUM, half),
          me == 0 ? "this rank" : "job rank 0", "the evens' call");
    } else {
      RANK_CHECK(ibcoll_allreduce(data.data(), out.data(), data.size(), IBCOLL_FLOAT32, IBCOLL_SUM,
                                  half) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
      RANK_CHECK(out[0] == 2.0f + 4.0f + 6.0f, "the odds' sum is " + std::to_string(out[0]));
    }
    RANK_CHECK(ibcoll_allreduce(data.data(), out.data(), data.size(), IBCOLL_FLOAT32, IBCOLL_SUM,
                                r.world()) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(out[1023] == static_cast<float>(n * (n + 1) / 2),
               "the world's sum is " + std::to_string(out[1023]));
    RANK_CHECK(ibcoll_comm_free(&half) == IBCOLL_SUCCESS, ibcoll_last_error());
    return 0;
  }));
}

}  // namespace
}  // namespace ibcoll::testing
