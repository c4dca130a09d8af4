// The UCX transport on the host, over UCX's tcp (UCX_TLS=tcp; in the VM over Soft-RoCE, test
// rxe.Ucx): forced for every peer
// (IBCOLL_TRANSPORT=ucx), and chosen by IBCOLL_TRANSPORT=auto between pretend nodes when no
// verbs device is there. Each asserts that UCX carried the bytes (ibcoll_get_counters), so a
// silent fallback to shared memory or verbs fails it.
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/collectives.h"
#include "tests/support/late_data.h"
#include "tests/support/transport_sweep.h"
#ifdef IBCOLL_HAVE_VERBS
#include "transport/verbs/device.h"
#endif

namespace ibcoll::testing {
namespace {

// Fails the rank unless UCX carried this process's messages and nothing else did.
void expect_only_ucx_carried(const CapiRank& r) {
  ibcoll_counters_t c{};
  RANK_CHECK(ibcoll_get_counters(r.context(), &c) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(c.ucx_bytes_sent > 0 && c.ucx_messages_sent > 0 && c.ucx_endpoints > 0,
             "UCX carried nothing (" + std::to_string(c.ucx_bytes_sent) + " bytes)");
  RANK_CHECK(c.verbs_bytes_sent == 0 && c.shm_bytes_sent == 0,
             "bytes went by verbs (" + std::to_string(c.verbs_bytes_sent) + ") or shm (" +
                 std::to_string(c.shm_bytes_sent) + ")");
}

// UCX_TLS=tcp, unless the test's environment sets UCX_TLS (the VM's run: rc_verbs,ud_verbs).
RankOptions over_ucx(std::map<std::string, std::string> more = {}) {
  RankOptions options;
  options.deadline = std::chrono::seconds(400);
  const char* tls = std::getenv("UCX_TLS");
  options.environment = {{"IBCOLL_TRANSPORT", "ucx"}, {"UCX_TLS", tls ? tls : "tcp"}};
  for (auto& [name, value] : more)
    options.environment[name] = value;
  return options;
}

// Every message algorithm forced in turn over UCX (tests/support/transport_sweep.h).
TEST(Ucx, EveryAlgorithmTwoToFourRanks) {
  every_message_algorithm_over("ucx", over_ucx(), expect_only_ucx_carried);
}

// The algorithms the table picks, on 4 ranks over UCX: a sweep short enough for the VM, where
// every job's UCX wire-up over rc_verbs and ud_verbs takes seconds.
TEST(Ucx, DefaultAlgorithmsFourRanks) {
  expect_all_ok(run_ranks(
      4,
      [](int, int) {
        CapiRank r;
        allreduce_sweep(r.world(), {DataType::int32, DataType::float64}, {1, 1031, 65537});
        bcast_every_root(r.world(), DataType::uint8, {7, 65537});
        expect_only_ucx_carried(r);
        return 0;
      },
      over_ucx()));
}

// IBCOLL_TRANSPORT=auto between pretend nodes (IBCOLL_NODE): shared memory inside each, and
// between them UCX where this machine has no active verbs device (verbs where it has one), with
// the hierarchical algorithms' network stages on it.
TEST(Ucx, AutoTakesUcxBetweenNodesWithoutAVerbsDevice) {
  const bool verbs_here =
#ifdef IBCOLL_HAVE_VERBS
      !transport::verbs::active_device_names().empty();
#else
      false;
#endif
  const std::string between = verbs_here ? "verbs" : "ucx";
  const std::vector<int> node_of = {0, 0, 1, 1, 2};
  for (const char* algorithm : {"hierarchical", "rails"}) {
    SCOPED_TRACE(algorithm);
    RankOptions options = over_ucx({{"IBCOLL_TRANSPORT", "auto"},
                                    {"IBCOLL_ALLREDUCE_ALGO", algorithm},
                                    {"IBCOLL_BCAST_ALGO", algorithm}});
    expect_all_ok(run_ranks(
        static_cast<int>(node_of.size()),
        [&](int me, int) {
          setenv("IBCOLL_NODE", ("pretend-node-" + std::to_string(node_of[me])).c_str(), 1);
          CapiRank r;
          expect_routes(r, node_of, between);
          allreduce_sweep(r.world(), {DataType::int32, DataType::float64}, {1, 1031, 100003});
          bcast_every_root(r.world(), DataType::uint8, {7, 65537});
          ibcoll_counters_t c{};
          RANK_CHECK(ibcoll_get_counters(r.context(), &c) == IBCOLL_SUCCESS, ibcoll_last_error());
          const uint64_t remote = verbs_here ? c.verbs_bytes_sent : c.ucx_bytes_sent;
          // The hierarchical stages leave some ranks nothing to send across: the node's leader
          // and the rails' members do.
          RANK_CHECK(node_of[me] != 0 || me != 0 || remote > 0,
                     "rank 0, a leader, sent nothing by " + between);
          RANK_CHECK(verbs_here || c.verbs_bytes_sent == 0, "bytes went by verbs");
          return 0;
        },
        options));
  }
}

// A rank killed between calls, the root of the bcasts the others make next: they only wait to
// receive from it, so only a send to it reveals its death (the channel's probe of a silent peer
// waited on; UCX's endpoint error then fails it). Their
// calls fail with IBCOLL_ERR_PEER_FAILED naming it within seconds, well before IBCOLL_TIMEOUT;
// then they finalize.
TEST(Ucx, ARankThatDiesFailsTheCallsWaitingOnIt) {
  const auto exits = run_ranks(
      3,
      [](int me, int) {
        CapiRank r;
        std::vector<double> x(1 << 16, 1.0);  // rendezvous-sized
        for (int i = 0; i < 20; ++i) {
          RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, x.data(), x.size(), IBCOLL_FLOAT64,
                                      IBCOLL_MAX, r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
        }
        // Every rank's last allreduce has returned before rank 2 dies: its own may end while a
        // partner still takes its data (seen in CI under load: rank 1's 20th allreduce failed
        // with "Endpoint timeout", rank 2's socket reset by its death).
        meet_without_ibcoll("ucx-allreduces-done", me, {0, 1, 2});
        if (me == 2) raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        const ibcoll_status_t s = ibcoll_bcast(x.data(), x.size(), IBCOLL_FLOAT64, 2, r.world());
        const std::string m = ibcoll_last_error();
        RANK_CHECK(s == IBCOLL_ERR_PEER_FAILED,
                   std::string("a call with a dead root: ") + ibcoll_status_name(s) + ": " + m);
        RANK_CHECK(m.find("peer 2") != std::string::npos || m.find("rank 2") != std::string::npos,
                   "the message does not name rank 2: " + m);
        // tcp: at once (the connection resets); rc: after its retries (several seconds).
        RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(30),
                   "the death was noticed before the timeout");
        meet_without_ibcoll("ucx-answered", me, {0, 1});
        return 0;
      },
      over_ucx({{"IBCOLL_TIMEOUT", "90s"},
                {"IBCOLL_CHECK_CALLS", "0"},
                {"IBCOLL_BCAST_ALGO", "binomial"}}));
  meeting_over("ucx-allreduces-done", {0, 1, 2});
  meeting_over("ucx-answered", {0, 1});
  EXPECT_EQ(exits[2].signal, SIGKILL) << describe(exits);
  EXPECT_TRUE(exits[0].ok() && exits[1].ok()) << describe(exits);
}

// A root that computes (makes no ibcoll call) for ten keepalive intervals while its receiver
// waits is slow, not dead: the receiver's probes are acknowledged by the root's side of the
// connection (its kernel), not by its process, and the bcast then completes.
TEST(Ucx, APeerThatComputesIsWaitedFor) {
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        CapiRank r;
        std::vector<double> x(1 << 16, me == 0 ? 2.0 : 0.0);  // rendezvous-sized
        RANK_CHECK(ibcoll_bcast(x.data(), 1, IBCOLL_FLOAT64, 0, r.world()) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        if (me == 0) std::this_thread::sleep_for(std::chrono::seconds(2));
        RANK_CHECK(ibcoll_bcast(x.data(), x.size(), IBCOLL_FLOAT64, 0, r.world()) == IBCOLL_SUCCESS,
                   std::string("a bcast waiting on a computing root: ") + ibcoll_last_error());
        RANK_CHECK(x.back() == 2.0, "the root's data did not arrive");
        return 0;
      },
      over_ucx({{"IBCOLL_KEEPALIVE", "200ms"}, {"IBCOLL_CHECK_CALLS", "0"}})));
}

// Nothing of a call that timed out lands in its buffer afterwards, though the root it waited on
// (stopped midway through UCX's rendezvous) sends the rest later. Over tcp only: over rc_verbs
// the receiver reads the data itself (RDMA read), so a stopped root cannot hold it back.
TEST(Ucx, NothingLandsInABufferAfterItsCallTimedOut) {
  expect_all_ok(run_ranks(
      2, [](int me, int) { return late_data_after_a_timeout(me, 32 << 20); },
      over_ucx({{"IBCOLL_TIMEOUT", "1s"}, {"IBCOLL_CHECK_CALLS", "0"}})));
  meeting_over("late-data-posted", {0, 1});
}

}  // namespace
}  // namespace ibcoll::testing
