// Errors through the C API between forked ranks: bad arguments are refused with a message
// naming the argument and change nothing; ranks that make different calls all get
// IBCOLL_ERR_MISMATCH naming what differs; a rank left alone times out instead of hanging,
// whether it waits or test-polls.
#include <gtest/gtest.h>
#include <signal.h>

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "collectives/slot_group.h"
#include "tests/support/collectives.h"
#include "tests/support/late_data.h"

namespace ibcoll::testing {
namespace {

// In the test, after a run in which rank 2 killed itself and ranks 0 and 1 met at "answered"
// once they had their answers: the meeting's files go, and the run ended so.
void expect_rank_2_killed(const std::vector<RankExit>& exits) {
  meeting_over("answered", {0, 1});
  EXPECT_EQ(exits[2].signal, SIGKILL) << describe(exits);
  EXPECT_TRUE(exits[0].ok() && exits[1].ok()) << describe(exits);
}

// Fails the rank unless `status` is `want` and the last error mentions `needle`.
void expect_error(ibcoll_status_t status, ibcoll_status_t want, const std::string& needle,
                  const std::string& what) {
  RANK_CHECK(status == want,
             what + ": got " + ibcoll_status_name(status) + " (" + ibcoll_last_error() + ")");
  RANK_CHECK(std::string(ibcoll_last_error()).find(needle) != std::string::npos,
             what + ": the message does not name " + needle + ": " + ibcoll_last_error());
}

TEST(Errors, BadArgumentsAreRefusedAndChangeNothing) {
  expect_all_ok(run_ranks(3, [](int, int n) {
    CapiRank r;
    const ibcoll_comm_t w = r.world();
    std::vector<float> data(8, 1.0f), out(8, 7.0f);
    constexpr auto kBad = IBCOLL_ERR_INVALID_ARGUMENT;
    expect_error(ibcoll_allreduce(nullptr, out.data(), 8, IBCOLL_FLOAT32, IBCOLL_SUM, w), kBad,
                 "send", "null send buffer");
    expect_error(ibcoll_allreduce(data.data(), nullptr, 8, IBCOLL_FLOAT32, IBCOLL_SUM, w), kBad,
                 "recv", "null receive buffer");
    expect_error(ibcoll_bcast(nullptr, 8, IBCOLL_FLOAT32, 0, w), kBad, "buffer",
                 "null bcast buffer");
    expect_error(ibcoll_allreduce(data.data(), out.data(), 8, static_cast<ibcoll_datatype_t>(99),
                                  IBCOLL_SUM, w),
                 kBad, "type", "unknown type");
    expect_error(ibcoll_allreduce(data.data(), out.data(), 8, IBCOLL_FLOAT32,
                                  static_cast<ibcoll_op_t>(-3), w),
                 kBad, "op", "unknown op");
    expect_error(ibcoll_allreduce(data.data(), out.data(), 8, IBCOLL_FLOAT32, IBCOLL_BXOR, w), kBad,
                 "op: bxor is not defined for float32", "bitwise op on floats");
    expect_error(ibcoll_bcast(data.data(), 8, IBCOLL_FLOAT32, n, w), kBad, "root",
                 "root out of range");
    expect_error(ibcoll_bcast(data.data(), 8, IBCOLL_FLOAT32, -1, w), kBad, "root",
                 "negative root");
    expect_error(
        ibcoll_allreduce(data.data(), out.data(), SIZE_MAX / 4, IBCOLL_FLOAT64, IBCOLL_SUM, w),
        kBad, "count", "count overflow");
    expect_error(ibcoll_allreduce(data.data(), out.data(), 8, IBCOLL_FLOAT32, IBCOLL_SUM, nullptr),
                 kBad, "comm", "null communicator");
    ibcoll_comm_t split = nullptr;
    expect_error(ibcoll_comm_split(w, -5, 0, &split), kBad, "color", "negative color");
    const int duplicate[] = {0, 0}, outside[] = {0, n};
    expect_error(ibcoll_comm_create(w, duplicate, 2, &split), kBad, "ranks", "a rank twice");
    expect_error(ibcoll_comm_create(w, outside, 2, &split), kBad, "ranks", "a rank outside");
    ibcoll_comm_t world = w;
    expect_error(ibcoll_comm_free(&world), kBad, "world", "freeing the world");
    expect_error(ibcoll_wait(nullptr), kBad, "request", "waiting on nothing");
    RANK_CHECK(out == std::vector<float>(8, 7.0f), "a refused call wrote to its buffer");

    // Count 0 with no buffers is a valid no-op; then the communicator still works, in step.
    RANK_CHECK(ibcoll_allreduce(nullptr, nullptr, 0, IBCOLL_INT8, IBCOLL_SUM, w) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(ibcoll_bcast(nullptr, 0, IBCOLL_INT8, 0, w) == IBCOLL_SUCCESS, ibcoll_last_error());
    RANK_CHECK(ibcoll_allreduce(data.data(), out.data(), 8, IBCOLL_FLOAT32, IBCOLL_SUM, w) ==
                   IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(out == std::vector<float>(8, static_cast<float>(n)), "sum after refusals");
    return 0;
  }));
}

// Every rank makes the "same" call but one field differs on the last rank; every rank must get
// IBCOLL_ERR_MISMATCH naming the field, and the next, matching call must work. In a small bcast
// (slots) a rank waits only for the root it names, and compares its call with the root's at
// once and with everyone's at its next call: a rank whose call matched its root's reports the
// mismatch there instead, after that call has run in full; the call after that works. Without
// slots, a small bcast's root (by the checked binomial: the check travels with the vector)
// returns once its messages are sent, if that is before the others' came, and then reports at
// its next call. Small bcasts by messages are checked in full here (IBCOLL_FULL_CHECK_EVERY=1);
// light_bcast_test.cpp covers the light ones.
TEST(Errors, MismatchedCallsFailOnEveryRank) {
  struct Case {
    const char* field;
    ibcoll_status_t (*call)(bool odd_one, ibcoll_comm_t comm, std::vector<int32_t>& data);
    // With slots, whether rank `me` reports it late; null: nobody. A single-copy bcast's root
    // waits for its receivers to be done with its buffer, and so sees a mismatch at once.
    bool (*reports_late)(int me, int ranks, bool single_copy) = nullptr;
    // Whether rank `me` makes itself the root of a bcast of 64 int32 (null: nobody).
    bool (*root_of_own_bcast)(int me, int ranks) = nullptr;
  };
  const Case cases[] = {
      {"count",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return ibcoll_allreduce(IBCOLL_IN_PLACE, d.data(), odd ? 100 : 200000, IBCOLL_INT32,
                                 IBCOLL_SUM, c);
       }},
      {"type",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return ibcoll_allreduce(IBCOLL_IN_PLACE, d.data(), 64, odd ? IBCOLL_FLOAT32 : IBCOLL_INT32,
                                 IBCOLL_SUM, c);
       }},
      {"op",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return ibcoll_allreduce(IBCOLL_IN_PLACE, d.data(), 64, IBCOLL_INT32,
                                 odd ? IBCOLL_MAX : IBCOLL_SUM, c);
       }},
      {"root",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return ibcoll_bcast(d.data(), 64, IBCOLL_INT32, odd ? 1 : 0, c);
       },
       // The odd rank names root 1; with 3 ranks or more rank 1 names root 0 and differs.
       [](int me, int n, bool single_copy) {
         return single_copy ? me != 0 && me != n - 1 : me != n - 1 || n == 2;
       },
       [](int me, int n) { return me == 0 || (n == 2 && me == 1); }},
      {"count",  // of a bcast: the root and all but one receiver agree
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return ibcoll_bcast(d.data(), odd ? 32 : 64, IBCOLL_INT32, 0, c);
       },
       [](int me, int n, bool single_copy) { return me != n - 1 && !(single_copy && me == 0); },
       [](int me, int) { return me == 0; }},
      {"collective",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return odd ? ibcoll_bcast(d.data(), 64, IBCOLL_INT32, 0, c)
                    : ibcoll_allreduce(IBCOLL_IN_PLACE, d.data(), 64, IBCOLL_INT32, IBCOLL_SUM, c);
       }},
  };
  // With the slot region, and without (the check then travels in messages); with bcasts read
  // from the root's memory (single_copy through the slots, direct without) and not.
  for (const auto& [slots, single_copy] :
       {std::pair{"1", "0"}, {"1", "1"}, {"0", "0"}, {"0", "1"}}) {
    RankOptions options;
    options.environment = {{"IBCOLL_SHM_SLOTS", slots},
                           {"IBCOLL_SHM_SINGLE_COPY", single_copy},
                           {"IBCOLL_FULL_CHECK_EVERY", "1"}};
    for (int ranks : {2, 3, 4}) {
      for (const Case& c : cases) {
        SCOPED_TRACE(std::string(c.field) + ", " + std::to_string(ranks) + " ranks, slots " +
                     slots + ", single copy " + single_copy);
        expect_all_ok(run_ranks(
            ranks,
            [&c, slots, single_copy](int me, int n) {
              CapiRank r;
              std::vector<int32_t> data(200000, 1);
              const bool by_single_copy = std::string(single_copy) == "1";
              if (std::string(slots) == "1" && by_single_copy)
                expect_algorithm(r.world(), IBCOLL_BCAST, 64, IBCOLL_INT32, "single_copy");
              const bool by_messages_root =
                  std::string(slots) == "0" && c.root_of_own_bcast && c.root_of_own_bcast(me, n) &&
                  std::string(ibcoll_algorithm(r.world(), IBCOLL_BCAST, 64, IBCOLL_INT32)) ==
                      "binomial";
              const ibcoll_status_t mismatched = c.call(me == n - 1, r.world(), data);
              // Such a root returns early only if its messages were sent before the others'
              // came: it reports at this call or the next.
              const bool late = (by_messages_root && mismatched == IBCOLL_SUCCESS) ||
                                (std::string(slots) == "1" && c.reports_late &&
                                 c.reports_late(me, n, by_single_copy));
              std::vector<int32_t> ones(5, 1);
              const ibcoll_status_t next = ibcoll_allreduce(IBCOLL_IN_PLACE, ones.data(), 5,
                                                            IBCOLL_INT32, IBCOLL_SUM, r.world());
              RANK_CHECK(ones == std::vector<int32_t>(5, n), "the call after a mismatch");
              if (late) {
                RANK_CHECK(mismatched == IBCOLL_SUCCESS, ibcoll_last_error());
                expect_error(next, IBCOLL_ERR_MISMATCH, c.field, "the call after running ahead");
                RANK_CHECK(
                    std::string(ibcoll_last_error()).find("before this one") != std::string::npos,
                    std::string("does not say the call is an earlier one: ") + ibcoll_last_error());
              } else {
                expect_error(mismatched, IBCOLL_ERR_MISMATCH, c.field, "mismatched call");
                RANK_CHECK(next == IBCOLL_SUCCESS, ibcoll_last_error());
              }
              RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, ones.data(), 5, IBCOLL_INT32, IBCOLL_SUM,
                                          r.world()) == IBCOLL_SUCCESS,
                         ibcoll_last_error());
              RANK_CHECK(ones == std::vector<int32_t>(5, n * n),
                         "the second call after a mismatch");
              return 0;
            },
            options));
      }
    }
  }
}

// Back-to-back small bcasts through the slots, one receiver's count differing in the second:
// it fails that call at once; the root and the receiver that matched it ran ahead and learn of
// it within SlotGroup::kRunAhead calls, in the call that compares it ("... calls before this
// one"), and every other call works. Results are never returned as good for the mismatched
// receiver's call.
TEST(Errors, AMismatchBehindARootThatRanAheadFailsAWindowLater) {
  constexpr int kAhead = static_cast<int>(collectives::SlotGroup::kRunAhead);
  expect_all_ok(run_ranks(3, [](int me, int n) {
    CapiRank r;
    expect_algorithm(r.world(), IBCOLL_BCAST, 4, IBCOLL_INT64, "slots");
    int failed_at = -1;
    std::string failure;
    for (int call = 0; call < kAhead + 3; ++call) {
      std::vector<int64_t> values(4, me == 0 ? call : -1);
      const size_t count = me == n - 1 && call == 1 ? 2 : 4;
      const ibcoll_status_t s = ibcoll_bcast(values.data(), count, IBCOLL_INT64, 0, r.world());
      if (s != IBCOLL_SUCCESS) {
        RANK_CHECK(failed_at < 0,
                   "a second failure at call " + std::to_string(call) + ": " + ibcoll_last_error());
        expect_error(s, IBCOLL_ERR_MISMATCH, "count", "the call that learns of the mismatch");
        failed_at = call;
        failure = ibcoll_last_error();
        continue;
      }
      RANK_CHECK(values == std::vector<int64_t>(4, call), "call " + std::to_string(call));
    }
    if (me == n - 1) {
      RANK_CHECK(failed_at == 1, "the mismatched receiver failed at " + std::to_string(failed_at));
    } else {
      RANK_CHECK(failed_at >= 2 && failed_at <= 1 + kAhead,
                 "rank " + std::to_string(me) + " learnt at call " + std::to_string(failed_at));
      RANK_CHECK(failure.find("before this one") != std::string::npos,
                 "does not say the call is an earlier one: " + failure);
    }
    return 0;
  }));
}

// A rank dies between collectives: the others' next call fails with IBCOLL_ERR_PEER_FAILED
// naming it, well before IBCOLL_TIMEOUT (the slot waits check that members live; the channel
// checks the peers its receives wait on).
TEST(Errors, ARankThatDiesFailsTheOthersCalls) {
  for (const char* slots : {"1", "0"}) {
    SCOPED_TRACE(std::string("slots ") + slots);
    RankOptions options;
    options.environment = {{"IBCOLL_SHM_SLOTS", slots}, {"IBCOLL_TIMEOUT", "6s"}};
    const auto exits = run_ranks(
        3,
        [](int me, int) {
          CapiRank r;
          double x = 1.0;
          for (int i = 0; i < 100; ++i) {
            RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_FLOAT64, IBCOLL_MAX,
                                        r.world()) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
          }
          if (me == 2) raise(SIGKILL);
          ibcoll_status_t s = IBCOLL_SUCCESS;
          for (int i = 0; i < 1000 && s == IBCOLL_SUCCESS; ++i)
            s = ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_FLOAT64, IBCOLL_MAX, r.world());
          expect_dead_rank_named(s, 2, "a call with a dead member");
          meet_without_ibcoll("answered", me, {0, 1});  // a survivor that left would look dead
          return 0;
        },
        options);
    expect_rank_2_killed(exits);
  }
}

// A single-copy bcast's root waits until each receiver is done with its buffer: rank 1 comes
// to the call late and still reads what the root had when it called, though the root fills its
// buffer again the moment its call returns. Then rank 2 dies instead of making the next call;
// the root, waiting for it to read, fails within seconds naming it (IBCOLL_TIMEOUT is a minute).
TEST(Errors, ASingleCopyBcastsRootWaitsForItsReceiversAndNoticesADeadOne) {
  RankOptions options;
  options.environment = {{"IBCOLL_SHM_SINGLE_COPY", "4K"}, {"IBCOLL_TIMEOUT", "60s"}};
  const auto exits = run_ranks(
      3,
      [](int me, int) {
        CapiRank r;
        constexpr size_t kBytes = 1 << 20;
        std::vector<uint8_t> data(kBytes, me == 0 ? 0xA5 : 0);
        expect_algorithm(r.world(), IBCOLL_BCAST, kBytes, IBCOLL_UINT8, "single_copy");
        if (me == 1) std::this_thread::sleep_for(std::chrono::milliseconds(300));
        RANK_CHECK(ibcoll_bcast(data.data(), kBytes, IBCOLL_UINT8, 0, r.world()) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        if (me == 0) std::fill(data.begin(), data.end(), 0x5A);  // the caller's again
        RANK_CHECK(me == 0 || data == std::vector<uint8_t>(kBytes, 0xA5),
                   "a receiver read the root's buffer after the root's call returned");
        if (me == 2) raise(SIGKILL);
        const auto start = std::chrono::steady_clock::now();
        const ibcoll_status_t s = ibcoll_bcast(data.data(), kBytes, IBCOLL_UINT8, 0, r.world());
        if (me == 1) {
          RANK_CHECK(s == IBCOLL_SUCCESS, ibcoll_last_error());  // it needs the root alone
        } else {
          expect_dead_rank_named(s, 2, "the root of a bcast with a dead receiver");
          RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
                     "the root waited far longer for a dead receiver than liveness checks take");
        }
        meet_without_ibcoll("answered", me, {0, 1});  // a survivor that left would look dead
        return 0;
      },
      options);
  expect_rank_2_killed(exits);
}

// Without slots, a small bcast's root returns once its messages are sent (the checked binomial
// carries the call check with the vector): receivers that call only after it has returned and
// reused its buffer get what it had, a communicator freed at once waits for them, and on 2, 3
// (folding) and 4 ranks every root does (IBCOLL_TIMEOUT 5 s: a root that waited would fail).
// Through the rings: a message read from its sender's memory (single copy) needs the root.
TEST(Errors, ASmallBcastsRootReturnsBeforeItsReceiversCall) {
  RankOptions options;
  options.environment = {
      {"IBCOLL_SHM_SLOTS", "0"}, {"IBCOLL_SHM_SINGLE_COPY", "0"}, {"IBCOLL_TIMEOUT", "5s"}};
  expect_roots_return_first(options, {2, 3, 4}, "shm");
}

// A root that returned early learns of a receiver's mismatched call afterwards (the receiver
// calls only then): a communicator made from the world next does not report it (every rank
// gets the communicator), the world's next call does; on the new communicator, freeing it
// does. (A small bcast checked in full, as every IBCOLL_FULL_CHECK_EVERY-th is.)
TEST(Errors, ALateMismatchIsReportedByTheNextCallOrTheFreeNotBySplit) {
  RankOptions options;
  options.environment = {{"IBCOLL_SHM_SLOTS", "0"},
                         {"IBCOLL_SHM_SINGLE_COPY", "0"},
                         {"IBCOLL_TIMEOUT", "20s"},
                         {"IBCOLL_FULL_CHECK_EVERY", "1"}};
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        CapiRank r;
        std::vector<int32_t> data(64, 1);
        // The root returns, then rank 1 makes a call of another count.
        auto mismatched_bcast = [&](ibcoll_comm_t comm, const std::string& meeting) {
          if (me == 1) meet_without_ibcoll(meeting, me, {0});
          const ibcoll_status_t s =
              ibcoll_bcast(data.data(), me == 0 ? 64 : 32, IBCOLL_INT32, 0, comm);
          if (me == 0) {
            RANK_CHECK(s == IBCOLL_SUCCESS, meeting + ": " + ibcoll_last_error());
            meet_without_ibcoll(meeting, me, {0});
          } else {
            expect_error(s, IBCOLL_ERR_MISMATCH, "count", meeting + ": the receiver");
          }
        };
        mismatched_bcast(r.world(), "late-world");
        ibcoll_comm_t copy = nullptr;
        RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &copy) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        int64_t x = 1;
        const ibcoll_status_t next =
            ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_INT64, IBCOLL_SUM, r.world());
        if (me == 0) {
          expect_error(next, IBCOLL_ERR_MISMATCH, "before this one", "the world's next call");
        } else {
          RANK_CHECK(next == IBCOLL_SUCCESS, ibcoll_last_error());
        }
        mismatched_bcast(copy, "late-copy");
        const ibcoll_status_t freed = ibcoll_comm_free(&copy);
        RANK_CHECK(copy == nullptr, "the communicator was not freed");
        if (me == 0) {
          expect_error(freed, IBCOLL_ERR_MISMATCH, "last call", "freeing the communicator");
        } else {
          RANK_CHECK(freed == IBCOLL_SUCCESS, ibcoll_last_error());
        }
        x = 1;
        RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_INT64, IBCOLL_SUM, r.world()) ==
                           IBCOLL_SUCCESS &&
                       x == 2,
                   std::string("the world after: ") + ibcoll_last_error());
        return 0;
      },
      options));
  meeting_over("late-world", {0, 1});
  meeting_over("late-copy", {0, 1});
}

// A small bcast's root (without slots) returns before its receivers are heard from, so a
// receiver that dies instead of calling fails the root's next call, naming it, within seconds
// (IBCOLL_TIMEOUT is a minute); the other receiver, which waits on it, fails at once. (Checked
// in full: a light bcast's receiver waits on its root alone, light_bcast_test.cpp.)
TEST(Errors, AReceiverThatDiesAfterTheRootReturnedFailsTheRootsNextCall) {
  RankOptions options;
  options.environment = {
      {"IBCOLL_SHM_SLOTS", "0"}, {"IBCOLL_TIMEOUT", "60s"}, {"IBCOLL_FULL_CHECK_EVERY", "1"}};
  const auto exits = run_ranks(
      3,
      [](int me, int) {
        CapiRank r;
        std::vector<uint8_t> data(100, me == 0 ? 0xA5 : 0);
        expect_algorithm(r.world(), IBCOLL_BCAST, data.size(), IBCOLL_UINT8, "binomial");
        if (me == 2) raise(SIGKILL);
        const ibcoll_status_t s =
            ibcoll_bcast(data.data(), data.size(), IBCOLL_UINT8, 0, r.world());
        if (me == 0) {
          RANK_CHECK(s == IBCOLL_SUCCESS, ibcoll_last_error());  // it returned early
          const auto start = std::chrono::steady_clock::now();
          int64_t x = 1;
          expect_dead_rank_named(
              ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_INT64, IBCOLL_SUM, r.world()), 2,
              "the root's call after a receiver died");
          RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
                     "the root waited far longer for a dead receiver than liveness checks take");
        } else {
          expect_dead_rank_named(s, 2, "a receiver whose partner died");
        }
        meet_without_ibcoll("answered", me, {0, 1});  // a survivor that left would look dead
        return 0;
      },
      options);
  expect_rank_2_killed(exits);
}

// A large node-local allreduce (staged: in chunks through the staging halves) of `x`, started
// and test-polled a little, so that this rank has begun its chunks; then left running.
ibcoll_request_t start_staged_allreduce(CapiRank& r, std::vector<double>& x) {
  expect_algorithm(r.world(), IBCOLL_ALLREDUCE, x.size(), IBCOLL_FLOAT64, "staged");
  ibcoll_request_t request = nullptr;
  RANK_CHECK(ibcoll_iallreduce(IBCOLL_IN_PLACE, x.data(), x.size(), IBCOLL_FLOAT64, IBCOLL_SUM,
                               r.world(), &request) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  int done = 0;
  for (int i = 0; i < 200 && !done; ++i)
    RANK_CHECK(ibcoll_test(request, &done) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(!done, "the call ended before the others were left waiting");
  return request;
}

// A rank dies while a large node-local allreduce (staged, in chunks through shared memory) is
// under way: it has started its part and stops polling, then is killed. The others, waiting
// on its chunks, fail with IBCOLL_ERR_PEER_FAILED naming it instead of waiting for the timeout.
TEST(Errors, ARankThatDiesInsideALargeCallFailsTheOthers) {
  RankOptions options;
  options.environment = {{"IBCOLL_TIMEOUT", "8s"},  // also bounds finalize, without rank 2
                         {"IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", "0"}};
  const auto exits = run_ranks(
      3,
      [](int me, int) {
        CapiRank r;
        std::vector<double> x(1 << 20, 1.0);
        const size_t count = x.size();
        if (me == 2) {
          start_staged_allreduce(r, x);
          raise(SIGKILL);
        }
        const auto start = std::chrono::steady_clock::now();
        ibcoll_status_t s = IBCOLL_SUCCESS;
        for (int i = 0; i < 100 && s == IBCOLL_SUCCESS; ++i)
          s = ibcoll_allreduce(IBCOLL_IN_PLACE, x.data(), count, IBCOLL_FLOAT64, IBCOLL_SUM,
                               r.world());
        expect_dead_rank_named(s, 2, "a large call with a dead member");
        RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(6),
                   "the death was noticed before the timeout");
        meet_without_ibcoll("answered-large", me, {0, 1});
        return 0;
      },
      options);
  meeting_over("answered-large", {0, 1});
  EXPECT_EQ(exits[2].signal, SIGKILL) << describe(exits);
  EXPECT_TRUE(exits[0].ok() && exits[1].ok()) << describe(exits);
}

// A rank dies inside a large single-copy allreduce (2 ranks: each reads the other's input and
// then its finished half). It publishes its call before the other rank calls, then dies: at
// once (the other finds its call published and its process gone when it reads), or once the
// other has read its input and waits for its half (the other's wait finds it gone). Either
// way the survivor fails with IBCOLL_ERR_PEER_FAILED naming it, well before its timeout.
TEST(Errors, ARankThatDiesInsideASingleCopyAllreduceFailsTheOther) {
  for (const bool waited_on : {false, true}) {
    SCOPED_TRACE(waited_on ? "it dies while waited on" : "it dies before it is read");
    RankOptions options;
    options.environment = {{"IBCOLL_SHM_SINGLE_COPY", "4K"},
                           {"IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", "1M"},
                           {"IBCOLL_TIMEOUT", "8s"}};
    const auto exits = run_ranks(
        2,
        [waited_on](int me, int) {
          CapiRank r;
          std::vector<double> x(1 << 20, 1.0);
          expect_algorithm(r.world(), IBCOLL_ALLREDUCE, x.size(), IBCOLL_FLOAT64, "single_copy");
          if (me == 1) {
            ibcoll_request_t request = nullptr;
            RANK_CHECK(ibcoll_iallreduce(IBCOLL_IN_PLACE, x.data(), x.size(), IBCOLL_FLOAT64,
                                         IBCOLL_SUM, r.world(), &request) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
            int done = 0;  // one look publishes the call; rank 0 has not made its own yet
            RANK_CHECK(ibcoll_test(request, &done) == IBCOLL_SUCCESS && !done,
                       "the call ended before rank 0 made its own");
            if (waited_on) std::this_thread::sleep_for(std::chrono::milliseconds(800));
            raise(SIGKILL);
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(300));
          const auto start = std::chrono::steady_clock::now();
          const ibcoll_status_t s = ibcoll_allreduce(IBCOLL_IN_PLACE, x.data(), x.size(),
                                                     IBCOLL_FLOAT64, IBCOLL_SUM, r.world());
          expect_dead_rank_named(s, 1, "a single-copy allreduce with a dead member");
          const std::string reading = "single-copy allreduce: job rank 1";
          RANK_CHECK(
              (std::string(ibcoll_last_error()).find(reading) == std::string::npos) == waited_on,
              std::string("found by the wrong look: ") + ibcoll_last_error());
          RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(4),
                     "the death was noticed before the timeout");
          return 0;
        },
        options);
    EXPECT_EQ(exits[1].signal, SIGKILL) << describe(exits);
    EXPECT_TRUE(exits[0].ok()) << describe(exits);
  }
}

// Fails the rank unless `call` fails with `want` and a message holding `needle` in well under
// the `timeout` the ranks run with (the communicator is marked failed: nobody waits it out).
void expect_prompt_failure(const std::function<ibcoll_status_t()>& call, ibcoll_status_t want,
                           const std::string& needle, std::chrono::milliseconds timeout,
                           const std::string& what) {
  const auto start = std::chrono::steady_clock::now();
  const ibcoll_status_t s = call();
  const auto took = std::chrono::steady_clock::now() - start;
  expect_error(s, want, needle, what);
  RANK_CHECK(
      took < timeout / 2,
      what + ": took " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
          " ms, as if it waited for a turn that never comes");
}

// A small node-local call (slots) that two ranks give up on (their deadline passes while rank 2
// sleeps) loses the communicator's turns. Rank 2's late call still runs (the others had
// published their parts), but every later call on the communicator fails at once everywhere,
// saying why, where it used to wait out the deadline for a turn that never came.
TEST(Errors, AGivenUpSlotCallFailsTheCommunicatorEverywhere) {
  constexpr auto kTimeout = std::chrono::milliseconds(2000);
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "2s";
  expect_all_ok(run_ranks(
      3,
      [&](int me, int) {
        CapiRank r;
        double x = 1.0;
        auto allreduce = [&] {
          return ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_FLOAT64, IBCOLL_SUM, r.world());
        };
        expect_algorithm(r.world(), IBCOLL_ALLREDUCE, 1, IBCOLL_FLOAT64, "slots");
        if (me == 2) {
          std::this_thread::sleep_for(kTimeout + std::chrono::milliseconds(1500));
          RANK_CHECK(allreduce() == IBCOLL_SUCCESS && x == 3.0, ibcoll_last_error());
          expect_prompt_failure(allreduce, IBCOLL_ERR_TIMEOUT, "gave up", kTimeout,
                                "the late rank's next call");
        } else {
          expect_error(allreduce(), IBCOLL_ERR_TIMEOUT,
                       "allreduce #1 (slots) on communicator 1 of 3 ranks: it waits for rank 2",
                       "left waiting");
          expect_prompt_failure(allreduce, IBCOLL_ERR_TIMEOUT, "failed in an earlier call",
                                kTimeout, "a call after giving up");
        }
        std::vector<int32_t> data(16, 1);
        expect_prompt_failure(
            [&] { return ibcoll_bcast(data.data(), 16, IBCOLL_INT32, 0, r.world()); },
            IBCOLL_ERR_TIMEOUT, "failed in an earlier call", kTimeout, "a bcast after");
        return 0;
      },
      options));
}

// The same inside a large node-local allreduce (staged, in chunks): rank 2 starts it, polls a
// little and then stops polling past the others' deadline. They give up among the chunks; when
// rank 2 polls again its call fails at once, and later calls fail at once everywhere.
TEST(Errors, AStagedCallGivenUpAmongItsChunksFailsTheCommunicatorEverywhere) {
  constexpr auto kTimeout = std::chrono::milliseconds(2000);
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "2s";
  options.environment["IBCOLL_ALLREDUCE_SINGLE_COPY_FROM"] = "0";
  expect_all_ok(run_ranks(
      3,
      [&](int me, int) {
        CapiRank r;
        std::vector<double> x(1 << 20, 1.0);
        auto allreduce = [&] {
          return ibcoll_allreduce(IBCOLL_IN_PLACE, x.data(), x.size(), IBCOLL_FLOAT64, IBCOLL_SUM,
                                  r.world());
        };
        if (me == 2) {
          ibcoll_request_t request = start_staged_allreduce(r, x);
          std::this_thread::sleep_for(kTimeout + std::chrono::milliseconds(1500));
          expect_prompt_failure([&] { return ibcoll_wait(request); }, IBCOLL_ERR_TIMEOUT, "gave up",
                                kTimeout, "the stalled rank's call");
          RANK_CHECK(ibcoll_request_free(&request) == IBCOLL_SUCCESS, ibcoll_last_error());
        } else {
          expect_error(allreduce(), IBCOLL_ERR_TIMEOUT, "allreduce #1 (staged)",
                       "left waiting among chunks");
        }
        expect_prompt_failure(allreduce, IBCOLL_ERR_TIMEOUT, "failed in an earlier call", kTimeout,
                              "a call after");
        return 0;
      },
      options));
}

// Nothing of a call that timed out lands in its buffer afterwards, though the root it waited on
// sends the rest later (tests/support/late_data.h), through the rings.
TEST(Errors, NothingLandsInABufferAfterItsCallTimedOut) {
  RankOptions options;
  options.environment = {
      {"IBCOLL_TIMEOUT", "1s"}, {"IBCOLL_SHM_SINGLE_COPY", "0"}, {"IBCOLL_CHECK_CALLS", "0"}};
  expect_all_ok(run_ranks(
      2, [](int me, int) { return late_data_after_a_timeout(me, 32 << 20); }, options));
  meeting_over("late-data-posted", {0, 1});
}

// One rank refuses its arguments; the others, waiting for it, end with a timeout error that
// names the call (collective, number, algorithm, communicator) and the rank it still waits for,
// through the slots and through messages.
TEST(Errors, RanksLeftWaitingTimeOut) {
  for (const char* slots : {"1", "0"}) {
    SCOPED_TRACE(std::string("slots ") + slots);
    RankOptions options;
    options.environment = {{"IBCOLL_TIMEOUT", "5s"}, {"IBCOLL_SHM_SLOTS", slots}};
    expect_all_ok(run_ranks(
        3,
        [slots](int me, int) {
          CapiRank r;
          std::vector<double> data(16, 1.0);
          const int root = me == 0 ? 7 : 0;
          const ibcoll_status_t s = ibcoll_bcast(data.data(), 16, IBCOLL_FLOAT64, root, r.world());
          if (me == 0) {
            expect_error(s, IBCOLL_ERR_INVALID_ARGUMENT, "root", "root out of range");
            return 0;
          }
          expect_error(s, IBCOLL_ERR_TIMEOUT, "did not complete within 5000 ms", "left waiting");
          const std::string call = std::string("bcast #1 (") +
                                   (std::string(slots) == "1" ? "slots" : "binomial") +
                                   ") on communicator 1 of 3 ranks: it waits for ";
          expect_error(s, IBCOLL_ERR_TIMEOUT, call, "the call named");
          // Through the slots each waits for the root's publication of the slot call; through
          // messages, for its partner's message in a step of the check's exchange (rank 1 waits
          // for rank 0, rank 2 for rank 1).
          const std::string partner = std::to_string(me - 1);
          expect_error(s, IBCOLL_ERR_TIMEOUT,
                       std::string(slots) == "1" ? "rank 0 (pid"
                                                 : "a message from rank " + partner +
                                                       " (job rank " + partner + ") in step ",
                       "the rank awaited");
          if (std::string(slots) == "1") {
            expect_error(s, IBCOLL_ERR_TIMEOUT, "to publish slot call ", "the step awaited");
          }
          return 0;
        },
        options));
  }
}

// SIGUSR1 (what mpirun forwards) makes a rank write what its calls in flight wait for, to
// IBCOLL_HANG_REPORT, without disturbing them: rank 1 has a bcast outstanding on a second
// communicator and waits in an allreduce on the world, both of which rank 0 joins only once it
// has read rank 1's report, which names each call and the rank it waits for.
TEST(Errors, AHangReportOnSignalNamesWhatEachCallWaitsFor) {
  const std::string pattern = "/tmp/ibcoll-hang-" + std::to_string(getpid()) + "-%r.txt";
  const std::string report = "/tmp/ibcoll-hang-" + std::to_string(getpid()) + "-1.txt";
  for (const char* slots : {"1", "0"}) {
    SCOPED_TRACE(std::string("slots ") + slots);
    unlink(report.c_str());
    RankOptions options;
    options.environment = {{"IBCOLL_HANG_REPORT", pattern}, {"IBCOLL_SHM_SLOTS", slots}};
    expect_all_ok(run_ranks(
        2,
        [&report, slots](int me, int) {
          CapiRank r;
          std::vector<int64_t> pids(2, 0);
          pids[static_cast<size_t>(me)] = getpid();
          RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, pids.data(), 2, IBCOLL_INT64, IBCOLL_SUM,
                                      r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          ibcoll_comm_t other = nullptr;
          RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &other) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          double x = 1.0;
          int32_t word = me == 0 ? 77 : 0;
          ibcoll_request_t bcast = nullptr;
          if (me == 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            kill(static_cast<pid_t>(pids[1]), SIGUSR1);
            // The split was call #2 on the world.
            const std::string algorithm =
                std::string(slots) == "1" ? "slots" : "recursive_doubling";
            const std::string allreduce =
                "allreduce #3 (" + algorithm + ") on communicator 1 of 2 ranks: it waits for ";
            const std::string bcast_call =
                "bcast #1 (" + std::string(std::string(slots) == "1" ? "slots" : "binomial") +
                ") on communicator 2 of 2 ranks: it waits for ";
            std::string text;
            for (int i = 0; i < 500 && std::count(text.begin(), text.end(), '\n') < 3; ++i) {
              std::this_thread::sleep_for(std::chrono::milliseconds(10));
              std::ifstream in(report);
              text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
            }
            RANK_CHECK(text.find("ibcoll hang report: rank 1") != std::string::npos &&
                           text.find("2 call(s) in flight") != std::string::npos &&
                           text.find(allreduce) != std::string::npos &&
                           text.find(bcast_call) != std::string::npos &&
                           text.find("rank 0") != std::string::npos,
                       "the report: " + text);
          } else {
            RANK_CHECK(ibcoll_ibcast(&word, 1, IBCOLL_INT32, 0, other, &bcast) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
          }
          RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_FLOAT64, IBCOLL_SUM,
                                      r.world()) == IBCOLL_SUCCESS &&
                         x == 2.0,
                     ibcoll_last_error());
          if (me == 0) {
            RANK_CHECK(ibcoll_bcast(&word, 1, IBCOLL_INT32, 0, other) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
          } else {
            RANK_CHECK(ibcoll_wait(bcast) == IBCOLL_SUCCESS && word == 77, ibcoll_last_error());
            ibcoll_request_free(&bcast);
          }
          ibcoll_comm_free(&other);
          return 0;
        },
        options));
    unlink(report.c_str());
  }
}

// A call that returned early and runs on is in the hang report too: rank 0's small bcast on
// the world (no slots: the checked binomial, whose root returns once its message is sent) waits
// for rank 1's fields while rank 0 polls an allreduce on a second communicator and signals
// itself; rank 1 joins both only once rank 0 has read its own report.
TEST(Errors, AHangReportNamesACallThatReturnedEarlyAndRunsOn) {
  const std::string pattern = "/tmp/ibcoll-held-" + std::to_string(getpid()) + "-%r.txt";
  const std::string report = "/tmp/ibcoll-held-" + std::to_string(getpid()) + "-0.txt";
  const std::string meeting = "held-report-" + std::to_string(getpid());
  unlink(report.c_str());
  RankOptions options;
  options.environment = {{"IBCOLL_HANG_REPORT", pattern},
                         {"IBCOLL_SHM_SLOTS", "0"},
                         {"IBCOLL_FULL_CHECK_EVERY", "1"}};  // a bcast root returns early
  expect_all_ok(run_ranks(
      2,
      [&](int me, int) {
        CapiRank r;
        ibcoll_comm_t other = nullptr;
        RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &other) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        int32_t word = me == 0 ? 77 : 0;
        double x = 1.0;
        if (me == 1) {
          meet_without_ibcoll(meeting, me, {0});
          RANK_CHECK(
              ibcoll_bcast(&word, 1, IBCOLL_INT32, 0, r.world()) == IBCOLL_SUCCESS && word == 77,
              ibcoll_last_error());
          RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_FLOAT64, IBCOLL_SUM, other) ==
                         IBCOLL_SUCCESS,
                     ibcoll_last_error());
        } else {
          RANK_CHECK(ibcoll_bcast(&word, 1, IBCOLL_INT32, 0, r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          ibcoll_request_t allreduce = nullptr;
          RANK_CHECK(ibcoll_iallreduce(&x, &x, 1, IBCOLL_FLOAT64, IBCOLL_SUM, other, &allreduce) ==
                         IBCOLL_SUCCESS,
                     ibcoll_last_error());
          raise(SIGUSR1);
          // The split was call #1 on the world, so the bcast is #2.
          const std::string held =
              "bcast #2 (binomial) on communicator 1 of 2 ranks: it waits for "
              "a message from rank 1";
          std::string text;
          for (int i = 0; i < 500 && text.find("runs on") == std::string::npos; ++i) {
            int done = 0;
            RANK_CHECK(ibcoll_test(allreduce, &done) == IBCOLL_SUCCESS && !done,
                       "the allreduce ended without rank 1");
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
            std::ifstream in(report);
            text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
          }
          RANK_CHECK(text.find("2 call(s) in flight") != std::string::npos &&
                         text.find("allreduce #1 (recursive_doubling) on communicator 2") !=
                             std::string::npos &&
                         text.find(held) != std::string::npos &&
                         text.find("(returned early; it runs on)") != std::string::npos,
                     "the report: " + text);
          meet_without_ibcoll(meeting, me, {1});
          RANK_CHECK(ibcoll_wait(allreduce) == IBCOLL_SUCCESS && x == 2.0, ibcoll_last_error());
          ibcoll_request_free(&allreduce);
        }
        ibcoll_comm_free(&other);
        return 0;
      },
      options));
  meeting_over(meeting, {0, 1});
  unlink(report.c_str());
}

// The same with a request that is test-polled instead of waited on: polling has a deadline too.
// Rank 0 makes no call; it sleeps past rank 1's deadline, and both meet at finalize.
TEST(Errors, PolledRequestsLeftWaitingTimeOut) {
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "2s";
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        CapiRank r;
        if (me == 0) {
          std::this_thread::sleep_for(std::chrono::seconds(3));
          return 0;
        }
        double value = 1.0;
        ibcoll_request_t request = nullptr;
        RANK_CHECK(ibcoll_iallreduce(&value, &value, 1, IBCOLL_FLOAT64, IBCOLL_SUM, r.world(),
                                     &request) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        int done = 0;
        ibcoll_status_t s = IBCOLL_SUCCESS;
        while (!done)
          s = ibcoll_test(request, &done);
        expect_error(s, IBCOLL_ERR_TIMEOUT, "polling", "polled and left waiting");
        RANK_CHECK(ibcoll_request_free(&request) == IBCOLL_SUCCESS, ibcoll_last_error());
        return 0;
      },
      options));
}

}  // namespace
}  // namespace ibcoll::testing
