// Allreduce and bcast through the C API over verbs (IBCOLL_TRANSPORT=verbs, so ranks on one
// machine still talk through Soft-RoCE) in the VM, 2..4 ranks, every algorithm forced in turn:
// a smaller sweep of types and sizes than on the host (emulation is slow), eager and rendezvous.
// (The slot algorithms run in shared memory only, so they are not forced here.)
#include <gtest/gtest.h>
#include <signal.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "collectives/registry.h"
#include "runtime/connection_plan.h"
#include "tests/support/collectives.h"
#include "tests/support/steady_calls.h"
#include "tests/support/transport_sweep.h"

namespace ibcoll::testing {
namespace {

TEST(VerbsCollectives, EveryAlgorithmTwoToFourRanks) {
  RankOptions options;
  options.deadline = std::chrono::seconds(300);
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}};
  every_message_algorithm_over("verbs", options);
}

// Ranks that name different nodes (IBCOLL_NODE) on one VM: shared memory inside each pretend
// node, verbs between them, so the hierarchical algorithms run their node and network stages
// for real; forced, and chosen by the table (checked calls up to 8 KiB flat, as the check is,
// larger ones hierarchical, the largest rails). Layouts with equal nodes, and three unequal ones
// with a node of one (the cluster's 2,1 job has two unequal real nodes). Under AddressSanitizer
// the forced ones only (the table's choice adds no memory path), on the three unequal nodes, and
// one type (the other's ops take the same memory paths), for CI's time.
TEST(VerbsCollectives, HierarchicalAcrossPretendNodes) {
#if defined(__SANITIZE_ADDRESS__)
  const std::vector<std::vector<int>> layouts = {{1, 2, 2}};
  const std::vector<DataType> types = {DataType::float64};
#else
  const std::vector<std::vector<int>> layouts = {{2, 2}, {1, 2, 2}};
  const std::vector<DataType> types = {DataType::int32, DataType::float64};
#endif
  const std::vector<std::pair<std::string, std::string>> forced = {
    {"hierarchical", "hierarchical"},
    {"rails", "rails"},
#if !defined(__SANITIZE_ADDRESS__)
    {"auto", "auto"},
#endif
  };
  for (const auto& [allreduce, bcast] : forced) {
    for (const std::vector<int>& layout : layouts) {
      std::vector<int> node_of;
      for (size_t node = 0; node < layout.size(); ++node)
        node_of.insert(node_of.end(), static_cast<size_t>(layout[node]), static_cast<int>(node));
      RankOptions options;
      options.deadline = std::chrono::seconds(300);
      options.environment = {{"IBCOLL_ALLREDUCE_ALGO", allreduce}, {"IBCOLL_BCAST_ALGO", bcast}};
      SCOPED_TRACE(allreduce + "/" + bcast + ", " + std::to_string(layout.size()) + " nodes of " +
                   std::to_string(node_of.size()) + " ranks");
      expect_all_ok(run_ranks(
          static_cast<int>(node_of.size()),
          [&](int me, int) {
            setenv("IBCOLL_NODE", ("pretend-node-" + std::to_string(node_of[me])).c_str(), 1);
            CapiRank r;
            expect_routes(r, node_of, "verbs");
            if (allreduce == "auto") {
              expect_algorithm(r.world(), IBCOLL_ALLREDUCE, 1000, IBCOLL_INT32,
                               "recursive_doubling");
              expect_algorithm(r.world(), IBCOLL_ALLREDUCE, 5000, IBCOLL_INT32, "hierarchical");
              expect_algorithm(r.world(), IBCOLL_ALLREDUCE, 1 << 20, IBCOLL_INT32, "rails");
              expect_algorithm(r.world(), IBCOLL_BCAST, 1000, IBCOLL_UINT8, "binomial");
              expect_algorithm(r.world(), IBCOLL_BCAST, 20000, IBCOLL_UINT8, "hierarchical");
              expect_algorithm(r.world(), IBCOLL_BCAST, 1 << 20, IBCOLL_UINT8, "rails");
            }
            allreduce_sweep(r.world(), types, {0, 1, 1031, 20000, 100003});
            bcast_every_root(r.world(), DataType::uint8, {0, 7, 65537});
            return 0;
          },
          options));
    }
  }
}

// The hierarchical allreduces on two pretend nodes, their ranks laid out contiguously and
// interleaved, with inputs whose sums round: every rank gets the same bits, and they are the
// documented order's (each node folds its members in member order, then the two node results
// are added, which commutes), not the rank order's, which differs from it at these inputs; so a
// stage that folded in another order, or a rank given the wrong node's part, shows.
TEST(VerbsCollectives, HierarchicalAllreducesFoldEachNodeInMemberOrderThenTheNodes) {
  const std::vector<std::vector<int>> layouts = {{0, 1, 0, 1}, {0, 1, 1, 0, 1}, {0, 0, 1, 1}};
  for (const char* algorithm : {"hierarchical", "rails"}) {
    for (const std::vector<int>& node_of : layouts) {
      RankOptions options;
      options.deadline = std::chrono::seconds(300);
      options.environment = {{"IBCOLL_ALLREDUCE_ALGO", algorithm}};
      std::string shape;
      for (int node : node_of)
        shape += std::to_string(node);
      SCOPED_TRACE(std::string(algorithm) + ", ranks on nodes " + shape);
      expect_all_ok(run_ranks(
          static_cast<int>(node_of.size()),
          [&](int me, int n) {
            setenv("IBCOLL_NODE", ("pretend-node-" + std::to_string(node_of[me])).c_str(), 1);
            CapiRank r;
            for (size_t count : {size_t{1}, size_t{1031}, size_t{20000}, size_t{100003}}) {
              expect_algorithm(r.world(), IBCOLL_ALLREDUCE, count, IBCOLL_FLOAT32, algorithm);
              std::vector<float> node_sum[2], rank_order = rounding_input(0, count);
              for (int rank = 0; rank < n; ++rank) {
                const std::vector<float> x = rounding_input(rank, count);
                std::vector<float>& sum = node_sum[node_of[rank]];
                if (sum.empty()) {
                  sum = x;
                } else {
                  for (size_t i = 0; i < count; ++i)
                    sum[i] += x[i];
                }
                if (rank > 0) {
                  for (size_t i = 0; i < count; ++i)
                    rank_order[i] += x[i];
                }
              }
              std::vector<float> want(count);
              for (size_t i = 0; i < count; ++i)
                want[i] = node_sum[0][i] + node_sum[1][i];
              const std::vector<float> mine = rounding_input(me, count);
              std::vector<float> got(count);
              RANK_CHECK(ibcoll_allreduce(mine.data(), got.data(), count, IBCOLL_FLOAT32,
                                          IBCOLL_SUM, r.world()) == IBCOLL_SUCCESS,
                         ibcoll_last_error());
              expect_same_everywhere(r.world(), got.data(), count * sizeof(float), "the sums");
              RANK_CHECK(std::memcmp(got.data(), want.data(), count * sizeof(float)) == 0,
                         std::to_string(count) + " floats: not the node-then-nodes fold's bits");
              if (count > 1) {
                RANK_CHECK(std::memcmp(want.data(), rank_order.data(), count * sizeof(float)) != 0,
                           "the inputs do not tell the orders apart");
              }
            }
            return 0;
          },
          options));
    }
  }
}

// Rank `me` of a job on 3 pretend nodes of 2 ranks: names its node (IBCOLL_NODE), and
// returns its remote peers in the plan of the start-up sizes (every rank and root planned).
constexpr int kPlanNodes = 3, kPlanPerNode = 2;
int remote_peers_in_plan(int me) {
  setenv("IBCOLL_NODE", ("pretend-node-" + std::to_string(me / kPlanPerNode)).c_str(), 1);
  runtime::PlanRequest request;
  request.nodes = kPlanNodes;
  request.ranks_per_node = kPlanPerNode;
  request.sizes = runtime::kStartUpPlanSizes;
  request.config = runtime::Config::from_environment();
  const runtime::ConnectionPlan plan = runtime::plan_connections(request);
  RANK_CHECK(plan.ranks_planned.at(static_cast<size_t>(me)) == me, "every rank planned");
  return plan.peers_of_rank.at(static_cast<size_t>(me)).remote;
}

// The connection plan (ibcoll_info --plan) is what a run connects on demand: on 3 pretend nodes
// of 2 ranks, with IBCOLL_CONNECT=on_demand, each rank plans the job, makes the plan's calls
// with the default selection (allreduce, and bcast from every root, at each size), and then has
// made exactly as many verbs connections as the plan gives it remote peers.
TEST(VerbsCollectives, ThePlanIsWhatARunConnects) {
  const std::vector<size_t>& sizes = runtime::kStartUpPlanSizes;
  RankOptions options;
  options.environment = {{"IBCOLL_CONNECT", "on_demand"}};
  options.deadline = std::chrono::seconds(300);
  expect_all_ok(run_ranks(
      kPlanNodes * kPlanPerNode,
      [&](int me, int) {
        const int planned = remote_peers_in_plan(me);

        CapiRank r;
        std::vector<float> in(sizes.back() / sizeof(float), 1.0f), out(in.size());
        std::vector<uint8_t> data(sizes.back());
        for (size_t bytes : sizes) {
          RANK_CHECK(ibcoll_allreduce(in.data(), out.data(), bytes / sizeof(float), IBCOLL_FLOAT32,
                                      IBCOLL_SUM, r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          RANK_CHECK(out[0] == static_cast<float>(r.size()), "allreduce result");
          for (int root = 0; root < r.size(); ++root) {
            RANK_CHECK(
                ibcoll_bcast(data.data(), bytes, IBCOLL_UINT8, root, r.world()) == IBCOLL_SUCCESS,
                ibcoll_last_error());
          }
        }
        ibcoll_counters_t counters;
        RANK_CHECK(ibcoll_get_counters(r.context(), &counters) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        RANK_CHECK(counters.verbs_connections == static_cast<uint64_t>(planned),
                   "rank " + std::to_string(me) + " made " +
                       std::to_string(counters.verbs_connections) +
                       " verbs connections, the plan says " + std::to_string(planned));
        return 0;
      },
      options));
}

// IBCOLL_CONNECT=planned (the default): on 3 pretend nodes of 2 ranks, ibcoll_init has
// started a connection to each remote peer of the rank's plan (of the start-up sizes, every
// root) and to none other, before any call; the plan's calls then connect nobody more. With
// on_demand, ibcoll_init connects nobody.
TEST(VerbsCollectives, TheWorldConnectsItsPlanAtStartUp) {
  for (const char* when : {"planned", "on_demand"}) {
    RankOptions options;
    options.environment = {{"IBCOLL_CONNECT", when}};
    options.deadline = std::chrono::seconds(300);
    expect_all_ok(run_ranks(
        kPlanNodes * kPlanPerNode,
        [&](int me, int) {
          const int planned = remote_peers_in_plan(me);
          const bool ahead = std::string(when) == "planned";

          CapiRank r;
          ibcoll_counters_t counters;
          RANK_CHECK(ibcoll_get_counters(r.context(), &counters) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          const uint64_t at_start = counters.verbs_connections;
          RANK_CHECK(at_start == static_cast<uint64_t>(ahead ? planned : 0),
                     std::string(when) + ": rank " + std::to_string(me) + " began with " +
                         std::to_string(at_start) + " verbs connections, its plan has " +
                         std::to_string(planned) + " remote peers");
          if (!ahead) return 0;
          const size_t largest = runtime::kStartUpPlanSizes.back();
          std::vector<float> in(largest / sizeof(float), 1.0f), out(in.size());
          std::vector<uint8_t> data(largest);
          for (size_t bytes : runtime::kStartUpPlanSizes) {
            RANK_CHECK(ibcoll_allreduce(in.data(), out.data(), bytes / sizeof(float),
                                        IBCOLL_FLOAT32, IBCOLL_SUM, r.world()) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
            for (int root = 0; root < r.size(); ++root) {
              RANK_CHECK(
                  ibcoll_bcast(data.data(), bytes, IBCOLL_UINT8, root, r.world()) == IBCOLL_SUCCESS,
                  ibcoll_last_error());
            }
          }
          RANK_CHECK(ibcoll_get_counters(r.context(), &counters) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          RANK_CHECK(counters.verbs_connections == at_start,
                     "the calls made " + std::to_string(counters.verbs_connections - at_start) +
                         " connections the plan had not");
          return 0;
        },
        options));
  }
}

// Forced rails on two pretend nodes of two: the node stage is the reduce-scatter through the
// staging halves, not a node allreduce. Rank 0 never makes the call, so rank 1, its node's
// other member, waits in that stage until its deadline (calls unchecked: a checked one would
// wait in its call check first), and its error says so (a silent fallback to the node allreduce
// would name that stage instead); nobody hangs.
TEST(VerbsCollectives, RailsReduceScattersInsideTheNode) {
  RankOptions options;
  options.environment = {
      {"IBCOLL_ALLREDUCE_ALGO", "rails"}, {"IBCOLL_CHECK_CALLS", "0"}, {"IBCOLL_TIMEOUT", "5s"}};
  const auto exits = run_ranks(
      4,
      [](int me, int) {
        setenv("IBCOLL_NODE", me < 2 ? "pretend-node-0" : "pretend-node-1", 1);
        CapiRank r;
        if (me != 0) {
          std::vector<float> data(1 << 16, 1.0f);
          const ibcoll_status_t s = ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), data.size(),
                                                     IBCOLL_FLOAT32, IBCOLL_SUM, r.world());
          RANK_CHECK(s != IBCOLL_SUCCESS, "the allreduce went on without rank 0");
          if (me == 1) {
            RANK_CHECK(std::strstr(ibcoll_last_error(), "the node's reduce-scatter"),
                       ibcoll_last_error());
          }
        }
        meet_without_ibcoll("rails-answered", me, {0, 1, 2, 3});
        return 0;
      },
      options);
  meeting_over("rails-answered", {0, 1, 2, 3});
  expect_all_ok(exits);
}

// Ranks that disagree fail together over verbs too, and the communicator goes on working.
TEST(VerbsCollectives, MismatchFailsEveryRank) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}};
  expect_all_ok(run_ranks(
      3,
      [](int me, int) {
        CapiRank r;
        std::vector<float> data(100000, 1.0f);
        const size_t count = me == 2 ? 1000 : data.size();
        RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), count, IBCOLL_FLOAT32, IBCOLL_SUM,
                                    r.world()) == IBCOLL_ERR_MISMATCH,
                   ibcoll_last_error());
        RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), 10, IBCOLL_FLOAT32, IBCOLL_SUM,
                                    r.world()) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        return 0;
      },
      options));
}

// A small bcast's root returns once its messages are sent, over verbs too (once connected): the
// receivers call only after it has returned and reused its buffer, and get what it had (on 2
// and 3 ranks, every root; a communicator freed at once waits for its receivers). A root whose
// message waits for a handshake stays in its call until it is sent.
TEST(VerbsCollectives, ASmallBcastsRootReturnsBeforeItsReceiversCall) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}, {"IBCOLL_TIMEOUT", "20s"}};
  expect_roots_return_first(options, {2, 3}, "verbs");
}

// Small calls in a steady stream make no heap allocation per call over verbs either, on 2 to 4
// ranks: no record per message or call, nor a list per send that waited for room. Messages
// that arrive before their receives are rare here (a receiver finds a message only when it
// polls, mostly after posting its receive); a transport test counts those:
// VerbsTransport.EarlyArrivalsTakeNoHeapAllocationOnceWarm.
TEST(VerbsCollectives, SteadySmallCallsDoNotAllocatePerCall) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}};
  expect_no_allocation_per_small_call(options, {2, 3, 4});
}

// One rank names a verbs device that does not exist: its set-up fails, and every other rank's
// init fails at that same step, naming it, instead of waiting for an exchange it never joins.
TEST(VerbsCollectives, ADeviceThatWillNotOpenOnOneRankFailsEveryRanksInit) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}, {"IBCOLL_TIMEOUT", "20s"}};
  expect_all_ok(run_ranks(
      3,
      [](int me, int) {
        if (me == 2) setenv("IBCOLL_DEVICE", "nosuch0", 1);
        ibcoll_context_t context = nullptr;
        const ibcoll_status_t s = ibcoll_init(&context);
        RANK_CHECK(s != IBCOLL_SUCCESS && !context, "init went on without rank 2's device");
        RANK_CHECK(std::strstr(ibcoll_last_error(), "failed on rank 2") &&
                       std::strstr(ibcoll_last_error(), "nosuch0"),
                   ibcoll_last_error());
        return 0;
      },
      options));
}

// Of two pretend nodes, the second's start-up calibration fails (IBCOLL_FAULT on both its
// ranks): every rank's init fails within seconds, naming a rank of that node and the
// calibration, where the first node used to start alone (under an MPI library its ranks then
// ran ibcoll's collectives while the others fell back to MPI's, and each waited on the other).
TEST(VerbsCollectives, ANodeWhoseCalibrationFailsFailsEveryRanksInit) {
  RankOptions options;
  options.environment = {{"IBCOLL_TIMEOUT", "60s"}};
  expect_all_ok(run_ranks(
      4,
      [](int me, int) {
        setenv("IBCOLL_NODE", me < 2 ? "pretend-node-0" : "pretend-node-1", 1);
        if (me >= 2) setenv("IBCOLL_FAULT", "node-calibration", 1);
        const auto start = std::chrono::steady_clock::now();
        ibcoll_context_t context = nullptr;
        const ibcoll_status_t s = ibcoll_init(&context);
        const auto took = std::chrono::steady_clock::now() - start;
        RANK_CHECK(s != IBCOLL_SUCCESS && !context, "init went on without the second node");
        RANK_CHECK((std::strstr(ibcoll_last_error(), "failed on rank 2") ||
                    std::strstr(ibcoll_last_error(), "failed on rank 3")) &&
                       std::strstr(ibcoll_last_error(), "node calibration"),
                   ibcoll_last_error());
        RANK_CHECK(took < std::chrono::seconds(20), "init took its deadline to fail");
        return 0;
      },
      options));
}

// A rank dies between calls; in the next allreduce (recursive doubling, 4 ranks) rank 0 waits
// only on rank 2, which waits on the dead rank 3, and rank 0 has never talked to rank 3. Rank 2
// finds rank 3 dead (keepalives) and says so to the ranks it reaches, so rank 0's call fails in
// seconds too, naming rank 3, where it used to wait out its own deadline (here 60 s).
TEST(VerbsCollectives, ADeadRankIsKnownToRanksThatNeverTalkedToIt) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}, {"IBCOLL_TIMEOUT", "60s"}};
  const auto exits = run_ranks(
      4,
      [](int me, int) {
        CapiRank r;
        double x = 1.0;
        auto allreduce = [&] {
          return ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_FLOAT64, IBCOLL_SUM, r.world());
        };
        expect_algorithm(r.world(), IBCOLL_ALLREDUCE, 1, IBCOLL_FLOAT64, "recursive_doubling");
        RANK_CHECK(allreduce() == IBCOLL_SUCCESS, ibcoll_last_error());
        if (me == 3) raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        const ibcoll_status_t s = allreduce();
        const auto took = std::chrono::steady_clock::now() - start;
        RANK_CHECK(s == IBCOLL_ERR_PEER_FAILED && (std::strstr(ibcoll_last_error(), "rank 3") ||
                                                   std::strstr(ibcoll_last_error(), "peer 3")),
                   std::string(ibcoll_status_name(s)) + ": " + ibcoll_last_error());
        RANK_CHECK(
            took < std::chrono::seconds(30),
            "rank 3's death took " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(took).count()) +
                " s to reach this rank");
        // Stay alive until every survivor has its answer: a survivor that left would be found
        // dead itself, and its partners would fail for that reason instead.
        meet_without_ibcoll("answered", me, {0, 1, 2});
        return 0;
      },
      options);
  meeting_over("answered", {0, 1, 2});
  EXPECT_EQ(exits[3].signal, SIGKILL) << describe(exits);
  EXPECT_TRUE(exits[0].ok() && exits[1].ok() && exits[2].ok()) << describe(exits);
}

// A rank exits without finalizing before anyone has talked to it. Rank 0's first call needs a
// connection to it, and its handshake goes unanswered (by datagram: nothing fails on the wire),
// as a busy peer's would; after a keepalive's silence, rank 0 asks the bootstrap, which saw the
// rank's connection end without a goodbye, and the call fails naming rank 1, where it used to
// wait out its deadline (here 60 s). Its finalize does not wait for rank 1 either.
TEST(VerbsCollectives, AHandshakeWithARankThatExitedFailsInSeconds) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}, {"IBCOLL_TIMEOUT", "60s"}};
  const auto exits = run_ranks(
      2,
      [](int me, int) {
        const auto start = std::chrono::steady_clock::now();
        {
          CapiRank r;
          if (me == 1) _exit(0);  // no ibcoll_finalize
          double x = 1.0;
          const ibcoll_status_t s =
              ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_FLOAT64, IBCOLL_SUM, r.world());
          RANK_CHECK(s == IBCOLL_ERR_PEER_FAILED && std::strstr(ibcoll_last_error(), "rank 1"),
                     std::string(ibcoll_status_name(s)) + ": " + ibcoll_last_error());
        }
        const auto took = std::chrono::steady_clock::now() - start;
        RANK_CHECK(
            took < std::chrono::seconds(30),
            "the call and finalize took " +
                std::to_string(std::chrono::duration_cast<std::chrono::seconds>(took).count()) +
                " s");
        return 0;
      },
      options);
  EXPECT_TRUE(exits[0].ok()) << describe(exits);
}

// A live rank that is slow to join a call (busy elsewhere, without polling, for 15 keepalive
// intervals and well past the silence that fails a dead peer) is waited for: its connections
// still acknowledge the probes, so nobody fails it, and the call ends right on every rank.
TEST(VerbsCollectives, ASlowLiveRankIsWaitedForInACall) {
  RankOptions options;
  options.environment = {
      {"IBCOLL_TRANSPORT", "verbs"}, {"IBCOLL_TIMEOUT", "60s"}, {"IBCOLL_KEEPALIVE", "200ms"}};
  expect_all_ok(run_ranks(
      3,
      [](int me, int n) {
        CapiRank r;
        std::vector<int32_t> x(20000);
        for (int call = 0; call < 2; ++call) {
          if (call == 1 && me == 2) std::this_thread::sleep_for(std::chrono::seconds(3));
          std::fill(x.begin(), x.end(), me + call);
          RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, x.data(), x.size(), IBCOLL_INT32, IBCOLL_SUM,
                                      r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          const int32_t want = n * (n - 1) / 2 + n * call;
          RANK_CHECK(std::all_of(x.begin(), x.end(), [&](int32_t v) { return v == want; }),
                     "call " + std::to_string(call) + ": wrong sum");
        }
        return 0;
      },
      options));
}

// The root of a large non-blocking bcast computes (no poll) for three times the liveness limit
// between starting it and waiting, while six ranks wait on it in the call: nobody fails it, and
// the call ends right everywhere. With keepalives sent as messages, the waiters' probes emptied
// the root's receive queue (64 buffers; a probe every 200 ms from each) and it was failed.
TEST(VerbsCollectives, ARootThatComputesBeforeWaitingIsNotFailed) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"},
                         {"IBCOLL_BCAST_ALGO", "direct"},
                         {"IBCOLL_TIMEOUT", "60s"},
                         {"IBCOLL_KEEPALIVE", "200ms"},
                         {"IBCOLL_SRQ_DEPTH", "64"}};
  expect_all_ok(run_ranks(
      7,
      [](int me, int) {
        CapiRank r;
        constexpr size_t kBytes = 1 << 20;
        expect_algorithm(r.world(), IBCOLL_BCAST, kBytes, IBCOLL_UINT8, "direct");
        std::vector<uint8_t> x(kBytes);
        for (int call = 0; call < 2; ++call) {  // the first connects everyone
          if (me == 0) {
            for (size_t i = 0; i < kBytes; ++i)
              x[i] = static_cast<uint8_t>(i * 31 + call);
          }
          ibcoll_request_t request;
          RANK_CHECK(ibcoll_ibcast(x.data(), kBytes, IBCOLL_UINT8, 0, r.world(), &request) ==
                         IBCOLL_SUCCESS,
                     ibcoll_last_error());
          if (me == 0 && call == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3000));
          RANK_CHECK(ibcoll_wait(request) == IBCOLL_SUCCESS,
                     "call " + std::to_string(call) + ": " + ibcoll_last_error());
          ibcoll_request_free(&request);
          for (size_t i = 0; i < kBytes; ++i) {
            RANK_CHECK(x[i] == static_cast<uint8_t>(i * 31 + call),
                       "call " + std::to_string(call) + ": wrong byte");
          }
        }
        return 0;
      },
      options));
}

}  // namespace
}  // namespace ibcoll::testing
