// ibcoll_init_with: a caller's own allgather instead of the environment's TCP store (how the
// Open MPI component starts ibcoll), communicators a caller agreed on by its own means
// (ibcoll_comm_next_id + ibcoll_comm_from_ranks, and ibcoll_comm_like for a duplicate), and the
// caller's progress function called inside ibcoll's waits, between forked ranks. Here the caller's
// allgather runs over a separate TCP store, as an MPI library's would run over its own wires.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ibcoll/ibcoll.h"
#include "runtime/bootstrap/launch_env.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/config.h"
#include "tests/support/forked_ranks.h"

namespace ibcoll::testing {
namespace {

// The caller's side: a fixed-size allgather over its own connection.
struct CallerWires {
  runtime::TcpStore store;
  int calls = 0;
  bool fail = false;

  static int allgather(const void* mine, void* all, size_t bytes, void* state) {
    auto& self = *static_cast<CallerWires*>(state);
    if (self.fail) return -1;
    const auto gathered = self.store.allgather("caller-" + std::to_string(self.calls++),
                                               std::string(static_cast<const char*>(mine), bytes));
    for (size_t r = 0; r < gathered.size(); ++r) {
      if (gathered[r].size() != bytes) return -1;
      std::memcpy(static_cast<char*>(all) + r * bytes, gathered[r].data(), bytes);
    }
    return 0;
  }
};

CallerWires connect_caller() {
  const runtime::LaunchInfo me = runtime::launch_info_from_environment();
  const runtime::Config config = runtime::Config::from_environment();
  return CallerWires{runtime::TcpStore(std::getenv("IBCOLL_BOOTSTRAP"), me.rank, me.size, me.secret,
                                       config.timeout)};
}

// Starts ibcoll over the caller's allgather; the status, with *context set on success.
ibcoll_status_t init_with(CallerWires& wires, int me, int n, ibcoll_context_t* context) {
  const ibcoll_bootstrap_t bootstrap{me, n, &CallerWires::allgather, &wires};
  *context = nullptr;
  return ibcoll_init_with(&bootstrap, context);
}

// The TCP store's allgather at 16, 64 and 256 forked ranks: every rank gets every rank's part,
// in rank order, in two allgathers in a row (their names keep them apart). The time from the
// first fork to the last exit goes to stdout for the record (machines differ: not asserted).
TEST(Bootstrap, TheTcpStoresAllgatherFromSixteenToTwoHundredFiftySixRanks) {
  for (int ranks : {16, 64, 256}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const auto start = std::chrono::steady_clock::now();
    expect_all_ok(run_ranks(ranks, [](int me, int n) {
      CallerWires wires = connect_caller();
      for (const std::string round : {"first", "second"}) {
        const auto all =
            wires.store.allgather("scale-" + round, round + " of " + std::to_string(me));
        RANK_CHECK(all.size() == static_cast<size_t>(n), "allgather: wrong number of parts");
        for (int r = 0; r < n; ++r) {
          RANK_CHECK(
              all[static_cast<size_t>(r)] == round + " of " + std::to_string(r),
              "allgather: rank " + std::to_string(r) + "'s part is " + all[static_cast<size_t>(r)]);
        }
      }
      return 0;
    }));
    std::printf("%d ranks: two allgathers in %.0f ms, forks and exits included\n", ranks,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                    .count());
  }
}

TEST(Bootstrap, InitWithTheCallersAllgatherAndCommunicatorsFromRanks) {
  expect_all_ok(run_ranks(3, [](int me, int n) {
    CallerWires wires = connect_caller();
    const ibcoll_bootstrap_t bootstrap{me, n, &CallerWires::allgather, &wires};
    ibcoll_context_t context = nullptr;
    RANK_CHECK(ibcoll_init_with(&bootstrap, &context) == IBCOLL_SUCCESS, ibcoll_last_error());
    RANK_CHECK(wires.calls > 0, "ibcoll did not use the caller's allgather");

    ibcoll_comm_t world = nullptr;
    ibcoll_comm_world(context, &world);
    int64_t value = me + 1, sum = 0;
    RANK_CHECK(ibcoll_allreduce(&value, &sum, 1, IBCOLL_INT64, IBCOLL_SUM, world) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(sum == n * (n + 1) / 2, "world sum");

    // The caller's progress runs inside ibcoll's waits until it is taken away.
    int polls = 0;
    auto count = [](void* state) { return ++*static_cast<int*>(state), 0; };
    RANK_CHECK(ibcoll_set_external_progress(context, count, &polls) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(ibcoll_bcast(&value, 1, IBCOLL_INT64, 0, world) == IBCOLL_SUCCESS &&
                   ibcoll_progress(context) == IBCOLL_SUCCESS && polls > 0,
               "the external progress was not called");
    ibcoll_set_external_progress(context, nullptr, nullptr);
    const int before = polls;
    ibcoll_progress(context);
    RANK_CHECK(polls == before, "the external progress was called after its removal");

    // Ranks 2 and 0, in that order, agree on an id and a stamp with the caller's allgather
    // (the largest next free id, the largest stamp); rank 1 stays out.
    struct Offer {
      unsigned id;
      uint64_t stamp;
    };
    const auto agree = [&] {
      Offer mine{};
      RANK_CHECK(ibcoll_comm_next_id(context, &mine.id) == IBCOLL_SUCCESS &&
                     ibcoll_comm_stamp(context, 0, &mine.stamp) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
      std::vector<Offer> all(static_cast<size_t>(n));
      RANK_CHECK(CallerWires::allgather(&mine, all.data(), sizeof(mine), &wires) == 0, "offers");
      Offer agreed{};
      for (const Offer& o : all)
        agreed = {std::max(agreed.id, o.id), std::max(agreed.stamp, o.stamp)};
      return agreed;
    };
    const Offer first = agree();
    const unsigned id = first.id;
    const int members[] = {2, 0};
    if (me != 1) {
      ibcoll_comm_t pair = nullptr;
      RANK_CHECK(
          ibcoll_comm_from_ranks(context, members, 2, id, first.stamp, &pair) == IBCOLL_SUCCESS,
          ibcoll_last_error());
      int rank = -1;
      ibcoll_comm_rank(pair, &rank);
      RANK_CHECK(rank == (me == 2 ? 0 : 1), "ranks follow the list's order");
      uint8_t data[5] = {};
      if (me == 2) std::memset(data, 9, sizeof(data));
      RANK_CHECK(ibcoll_bcast(data, sizeof(data), IBCOLL_UINT8, 0, pair) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
      RANK_CHECK(data[4] == 9, "bcast from job rank 2");
      // An id is held while its communicator lives; ids need not come in order (an MPI
      // library's agreements end in any order).
      ibcoll_comm_t again = nullptr;
      RANK_CHECK(ibcoll_comm_from_ranks(context, members, 2, id, first.stamp, &again) ==
                         IBCOLL_ERR_INVALID_ARGUMENT &&
                     std::strstr(ibcoll_last_error(), "id: ") && !again,
                 "an id held was accepted");
      ibcoll_comm_t later = nullptr, skipped = nullptr;
      RANK_CHECK(ibcoll_comm_from_ranks(context, members, 2, id + 2, first.stamp, &later) ==
                         IBCOLL_SUCCESS &&
                     ibcoll_comm_from_ranks(context, members, 2, id + 1, first.stamp, &skipped) ==
                         IBCOLL_SUCCESS,
                 ibcoll_last_error());
      int is_free[4] = {-1, -1, -1, -1};
      ibcoll_comm_id_free(context, id, &is_free[0]);
      ibcoll_comm_id_free(context, id + 1, &is_free[1]);
      ibcoll_comm_id_free(context, id + 3, &is_free[2]);
      ibcoll_comm_id_free(context, 65536, &is_free[3]);
      RANK_CHECK(!is_free[0] && !is_free[1] && is_free[2] == 1 && !is_free[3], "ids said free");
      // A communicator like the pair (a duplicate): its members in its order, and it outlives
      // the pair it was made like. Bad arguments are named and change nothing.
      ibcoll_comm_t twin = nullptr, refused = nullptr;
      RANK_CHECK(ibcoll_comm_like(pair, id + 3, first.stamp, &twin) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
      const auto refuses = [&](ibcoll_comm_t like, unsigned with_id, uint64_t stamp,
                               const char* named) {
        return ibcoll_comm_like(like, with_id, stamp, &refused) == IBCOLL_ERR_INVALID_ARGUMENT &&
               std::strstr(ibcoll_last_error(), named) && !refused;
      };
      RANK_CHECK(refuses(nullptr, id + 4, first.stamp, "like") &&
                     refuses(twin, id + 3, first.stamp, "id: ") &&
                     refuses(twin, id + 4, 0, "stamp: "),
                 "a bad argument was accepted");
      ibcoll_comm_id_free(context, id + 4, &is_free[2]);
      RANK_CHECK(is_free[2] == 1, "a refused communicator holds its id");
      ibcoll_comm_free(&pair);
      int twin_rank = -1, twin_size = 0;
      ibcoll_comm_rank(twin, &twin_rank);
      ibcoll_comm_size(twin, &twin_size);
      RANK_CHECK(twin_rank == (me == 2 ? 0 : 1) && twin_size == 2, "the twin's ranks");
      std::memset(data, me == 2 ? 7 : 0, sizeof(data));
      RANK_CHECK(ibcoll_bcast(data, sizeof(data), IBCOLL_UINT8, 0, twin) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
      RANK_CHECK(data[4] == 7, "bcast from job rank 2 on the twin");
      RANK_CHECK(ibcoll_comm_free(&twin) == IBCOLL_SUCCESS, ibcoll_last_error());
      ibcoll_comm_free(&later);
      ibcoll_comm_free(&skipped);
      ibcoll_comm_id_free(context, id, &is_free[0]);
      RANK_CHECK(is_free[0] == 1, "the id of a freed communicator is not free again");
    } else {
      ibcoll_comm_t outside = nullptr;
      RANK_CHECK(ibcoll_comm_from_ranks(context, members, 2, id, first.stamp, &outside) ==
                         IBCOLL_ERR_INVALID_ARGUMENT &&
                     std::strstr(ibcoll_last_error(), "ranks: this process"),
                 "a list without this rank was accepted");
    }
    // Freed, the id is taken again, with a stamp past the pair's calls: the members' next
    // agreement gives them the same id and a later stamp.
    const Offer second = agree();
    RANK_CHECK(second.id == id && second.stamp > first.stamp,
               "the next agreement gave id " + std::to_string(second.id) + " stamp " +
                   std::to_string(second.stamp));
    RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
    return 0;
  }));
}

// A caller whose allgather fails: every rank's init fails with an error that says so.
TEST(Bootstrap, FailingAllgatherFailsInit) {
  expect_all_ok(run_ranks(2, [](int me, int n) {
    CallerWires wires = connect_caller();
    wires.fail = true;
    const ibcoll_bootstrap_t bootstrap{me, n, &CallerWires::allgather, &wires};
    ibcoll_context_t context = nullptr;
    RANK_CHECK(ibcoll_init_with(&bootstrap, &context) == IBCOLL_ERR_PEER_FAILED && !context,
               "init went on without its allgather");
    RANK_CHECK(std::strstr(ibcoll_last_error(), "allgather failed"), ibcoll_last_error());
    const ibcoll_bootstrap_t bad_rank{n, n, &CallerWires::allgather, &wires};
    RANK_CHECK(ibcoll_init_with(&bad_rank, &context) == IBCOLL_ERR_INVALID_ARGUMENT &&
                   std::strstr(ibcoll_last_error(), "rank: "),
               ibcoll_last_error());
    return 0;
  }));
}

// One rank with a bad IBCOLL_* value: it still joins the first exchange, and every rank's init
// fails naming that rank and the variable (none is left waiting in the caller's allgather).
TEST(Bootstrap, BadConfigurationOnOneRankFailsEveryRank) {
  expect_all_ok(run_ranks(3, [](int me, int n) {
    CallerWires wires = connect_caller();
    if (me == 2) setenv("IBCOLL_TIMEOUT", "soon", 1);
    ibcoll_context_t context = nullptr;
    const ibcoll_status_t s = init_with(wires, me, n, &context);
    RANK_CHECK(s == IBCOLL_ERR_INVALID_ARGUMENT && !context,
               std::string("init: ") + ibcoll_status_name(s) + ": " + ibcoll_last_error());
    RANK_CHECK(std::strstr(ibcoll_last_error(), "failed on rank 2") &&
                   std::strstr(ibcoll_last_error(), "IBCOLL_TIMEOUT"),
               ibcoll_last_error());
    return 0;
  }));
}

// Rank 0 creates the node's shared segment, and here it cannot (its file size limit is too
// small for the segment: ftruncate fails). Every rank's init fails at that same step, naming
// rank 0 and the error, where the others used to wait in the caller's allgather for an
// exchange rank 0 never joined.
TEST(Bootstrap, ASetUpFailureOnOneRankFailsEveryRank) {
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "10s";
  expect_all_ok(run_ranks(
      3,
      [](int me, int n) {
        CallerWires wires = connect_caller();
        if (me == 0) {
          signal(SIGXFSZ, SIG_IGN);
          const rlimit small{4096, 4096};
          RANK_CHECK(setrlimit(RLIMIT_FSIZE, &small) == 0, "setrlimit");
        }
        ibcoll_context_t context = nullptr;
        const ibcoll_status_t s = init_with(wires, me, n, &context);
        RANK_CHECK(s == IBCOLL_ERR_SYSTEM && !context,
                   std::string("init: ") + ibcoll_status_name(s) + ": " + ibcoll_last_error());
        RANK_CHECK(std::strstr(ibcoll_last_error(), "failed on rank 0") &&
                       std::strstr(ibcoll_last_error(), "ftruncate"),
                   ibcoll_last_error());
        return 0;
      },
      options));
}

// One rank turns the slot region off where the others keep it: their calls would take
// different ways (slot turns on some ranks, messages on others) and hang. Every rank's init
// fails naming the setting and the rank that differs.
TEST(Bootstrap, SettingsEveryRankMustShareAreChecked) {
  expect_all_ok(run_ranks(3, [](int me, int n) {
    CallerWires wires = connect_caller();
    if (me == 1) setenv("IBCOLL_SHM_SLOTS", "0", 1);
    ibcoll_context_t context = nullptr;
    RANK_CHECK(init_with(wires, me, n, &context) == IBCOLL_ERR_INVALID_ARGUMENT && !context,
               "init went on with ranks set differently");
    RANK_CHECK(std::strstr(ibcoll_last_error(), "IBCOLL_SHM_SLOTS: rank 0 has 1, rank 1 has 0"),
               ibcoll_last_error());
    return 0;
  }));
}

}  // namespace
}  // namespace ibcoll::testing
