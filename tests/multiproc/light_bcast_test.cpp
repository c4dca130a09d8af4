// Light bcasts (collectives/bcast/light.h) between forked ranks over the shared-memory rings
// (slots off, so calls are checked by messages as across nodes): small bcasts whose receivers
// send nothing back, and what keeps their check honest: fields compared down the tree, probes
// between ranks that wait on each other, and the digest every fully checked call carries.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

RankOptions light_options(const std::string& full_check_every = "16") {
  RankOptions options;
  options.environment = {{"IBCOLL_SHM_SLOTS", "0"},
                         {"IBCOLL_SHM_SINGLE_COPY", "0"},
                         {"IBCOLL_FULL_CHECK_EVERY", full_check_every},
                         {"IBCOLL_TIMEOUT", "60s"}};
  return options;
}

uint64_t messages_sent(const CapiRank& r) {
  ibcoll_counters_t c{};
  RANK_CHECK(ibcoll_get_counters(r.context(), &c) == IBCOLL_SUCCESS, ibcoll_last_error());
  return c.shm_messages_sent;
}

// Fails the rank unless `status` is a mismatch whose message holds `needle`.
void expect_mismatch(ibcoll_status_t status, const std::string& message, const std::string& needle,
                     const std::string& what) {
  RANK_CHECK(status == IBCOLL_ERR_MISMATCH,
             what + ": got " + ibcoll_status_name(status) + " (" + message + ")");
  RANK_CHECK(message.find(needle) != std::string::npos,
             what + ": the message does not name " + needle + ": " + message);
}

// Every root in turn on 2-6 ranks (3, 5, 6: members that sit out of the doubling), 0 B to the
// largest size checked by messages; every byte checked. A light bcast sends one message per
// receiver, so 50 calls of each root send exactly 50·(n - 1) messages in all, where the
// fully checked bcast (IBCOLL_FULL_CHECK_EVERY=1) sends about n·log2(n) per call: counted.
TEST(LightBcast, DeliversTheRootsVectorWithOneMessagePerReceiver) {
  for (int ranks : {2, 3, 4, 5, 6}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_all_ok(run_ranks(
        ranks,
        [](int me, int n) {
          CapiRank r;
          bcast_every_root(r.world(), DataType::uint8, {0, 1, 100, 8192});
          constexpr int kCalls = 50;
          std::vector<int64_t> data(16);
          for (int root = 0; root < n; ++root) {
            int64_t sent = -static_cast<int64_t>(messages_sent(r));
            for (int call = 0; call < kCalls; ++call) {
              for (size_t i = 0; i < data.size(); ++i)
                data[i] = me == root ? call * 1000 + static_cast<int64_t>(i) : -1;
              RANK_CHECK(ibcoll_bcast(data.data(), data.size(), IBCOLL_INT64, root, r.world()) ==
                             IBCOLL_SUCCESS,
                         ibcoll_last_error());
              for (size_t i = 0; i < data.size(); ++i)
                RANK_CHECK(data[i] == call * 1000 + static_cast<int64_t>(i),
                           "call " + std::to_string(call) + " from root " + std::to_string(root));
            }
            sent += static_cast<int64_t>(messages_sent(r));
            RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &sent, 1, IBCOLL_INT64, IBCOLL_SUM,
                                        r.world()) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
            // At least one message per receiver and call; every 16th call, checked in full,
            // sends fewer than 2·n² (and a wait past IBCOLL_PROBE_AFTER a probe or two).
            const int64_t light = int64_t{kCalls} * (n - 1), full = kCalls / 16 + 1;
            RANK_CHECK(sent >= light && sent < light + full * 2 * n * n,
                       "root " + std::to_string(root) + ": " + std::to_string(sent) +
                           " messages for " + std::to_string(kCalls) + " bcasts");
          }
          return 0;
        },
        light_options()));
  }
}

// One rank's call differs from the others' (its root, its count, or it makes an allreduce):
// each rank fails that call with a mismatch naming the field, or, having had what it needed
// (a root needs nothing; a receiver whose senders agreed with it), returns; then the next
// fully checked call (here an allreduce) fails on every rank, its digest of the small bcasts
// before it differing, and the call after works. Nothing waits out IBCOLL_TIMEOUT.
TEST(LightBcast, AMismatchFailsTheCallOrTheNextFullCheckOnEveryRank) {
  struct Case {
    const char* field;
    ibcoll_status_t (*call)(bool odd_one, ibcoll_comm_t comm, std::vector<int32_t>& data);
  };
  const Case cases[] = {
      {"root",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return ibcoll_bcast(d.data(), 64, IBCOLL_INT32, odd ? 1 : 0, c);
       }},
      {"count",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return ibcoll_bcast(d.data(), odd ? 32 : 64, IBCOLL_INT32, 0, c);
       }},
      {"collective",
       [](bool odd, ibcoll_comm_t c, std::vector<int32_t>& d) {
         return odd ? ibcoll_bcast(d.data(), 64, IBCOLL_INT32, 0, c)
                    : ibcoll_allreduce(IBCOLL_IN_PLACE, d.data(), 64, IBCOLL_INT32, IBCOLL_SUM, c);
       }},
  };
  for (int ranks : {2, 3, 4, 5}) {
    for (const Case& c : cases) {
      SCOPED_TRACE(std::string(c.field) + ", " + std::to_string(ranks) + " ranks");
      expect_all_ok(run_ranks(
          ranks,
          [&c](int me, int n) {
            CapiRank r;
            expect_algorithm(r.world(), IBCOLL_BCAST, 64, IBCOLL_INT32, "binomial");
            const auto start = std::chrono::steady_clock::now();
            std::vector<int32_t> data(64, 1);
            const ibcoll_status_t mismatched = c.call(me == n - 1, r.world(), data);
            const std::string why = ibcoll_last_error();
            if (mismatched != IBCOLL_SUCCESS)
              expect_mismatch(mismatched, why, c.field, "the mismatched call");
            std::vector<int32_t> ones(5, 1);
            const ibcoll_status_t next = ibcoll_allreduce(IBCOLL_IN_PLACE, ones.data(), 5,
                                                          IBCOLL_INT32, IBCOLL_SUM, r.world());
            expect_mismatch(next, ibcoll_last_error(), "earlier small bcasts",
                            "the next full check");
            ones.assign(5, 1);
            RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, ones.data(), 5, IBCOLL_INT32, IBCOLL_SUM,
                                        r.world()) == IBCOLL_SUCCESS &&
                           ones == std::vector<int32_t>(5, n),
                       std::string("the call after: ") + ibcoll_last_error());
            RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(20),
                       "a rank waited far longer than its probes take");
            return 0;
          },
          light_options()));
    }
  }
}

// Ranks that each take the other for the root both wait as receivers, for a message the other
// will never send: each probes the other after IBCOLL_PROBE_AFTER and both fail naming the
// root, within seconds (IBCOLL_TIMEOUT is a minute). On 4 ranks the two pairs do so at once.
TEST(LightBcast, RanksThatTakeEachOtherForTheRootFailWithinAProbe) {
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_all_ok(run_ranks(
        ranks,
        [](int me, int) {
          CapiRank r;
          std::vector<int32_t> data(8, me);
          const auto start = std::chrono::steady_clock::now();
          const ibcoll_status_t s = ibcoll_bcast(data.data(), 8, IBCOLL_INT32, me ^ 1, r.world());
          expect_mismatch(s, ibcoll_last_error(), "root", "each other's root");
          RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
                     "the probes took far longer than IBCOLL_PROBE_AFTER");
          RANK_CHECK(data == std::vector<int32_t>(8, me), "a failed bcast wrote to the buffer");
          return 0;
        },
        light_options()));
  }
}

// A rank serves its probe desk from whatever call it makes next, on any communicator. 4 ranks,
// root 0; rank 3 makes an allreduce instead: it folds in rank 2's vector (a mismatch), then
// waits on rank 1, which had its vector from rank 0 and went on to an allreduce on another
// communicator, where it waits for rank 3. Rank 1 answers rank 3's probe from there, so rank 3
// fails within seconds (not at IBCOLL_TIMEOUT) and joins that allreduce, which then works.
TEST(LightBcast, ARankInACallOnAnotherCommunicatorAnswersProbes) {
  expect_all_ok(run_ranks(
      4,
      [](int me, int) {
        CapiRank r;
        ibcoll_comm_t other = nullptr;
        RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &other) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        std::vector<int32_t> data(8, me);
        const auto start = std::chrono::steady_clock::now();
        if (me == 3) {
          const ibcoll_status_t s = ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), 8, IBCOLL_INT32,
                                                     IBCOLL_SUM, r.world());
          expect_mismatch(s, ibcoll_last_error(), "collective", "an allreduce against bcasts");
          RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
                     "rank 1 did not answer the probe from its call on the other communicator");
        } else {
          RANK_CHECK(ibcoll_bcast(data.data(), 8, IBCOLL_INT32, 0, r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          RANK_CHECK(data == std::vector<int32_t>(8, 0), "the bcast's vector");
        }
        int32_t one = 1;
        RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &one, 1, IBCOLL_INT32, IBCOLL_SUM, other) ==
                       IBCOLL_SUCCESS,
                   ibcoll_last_error());
        RANK_CHECK(one == 4, "the allreduce on the other communicator");
        RANK_CHECK(ibcoll_comm_free(&other) == IBCOLL_SUCCESS, ibcoll_last_error());
        return 0;
      },
      light_options("1024")));
}

// A rank that takes itself for the root of a small bcast the others take from rank 0 sends and
// returns like a root (it needs nothing), and the others may all have had what they need from
// senders that agree with them: with no allreduce after, the ranks learn at the next bcast
// checked in full (IBCOLL_FULL_CHECK_EVERY=4: the 4th), which fails everywhere (its root, which
// returns once its messages are out, at the call after), whoever failed already; the bcasts
// after work.
TEST(LightBcast, ARankThatTookItselfForTheRootIsCaughtAtTheNextFullCheck) {
  for (int ranks : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_all_ok(run_ranks(
        ranks,
        [](int me, int n) {
          CapiRank r;
          int failed_at = -1;
          for (int call = 0; call < 8; ++call) {
            const bool self_root = me == n - 1 && call == 1;
            std::vector<int64_t> data(4, me == 0 || self_root ? call : -1);
            const ibcoll_status_t s =
                ibcoll_bcast(data.data(), 4, IBCOLL_INT64, self_root ? me : 0, r.world());
            if (s == IBCOLL_SUCCESS) {
              RANK_CHECK(call == 1 || data == std::vector<int64_t>(4, call),
                         "call " + std::to_string(call) + " returned another vector");
              continue;
            }
            const std::string why = ibcoll_last_error();
            if (call == 1) {
              expect_mismatch(s, why, "root", "the mismatched call");
            } else {
              RANK_CHECK(failed_at < 0 || failed_at == 1,
                         "a second failure at call " + std::to_string(call) + ": " + why);
              // The root of the full check returns before the others are heard from (a full
              // small bcast's root does) and learns at the call after it.
              RANK_CHECK(call == 3 || (me == 0 && call == 4),
                         "learnt at call " + std::to_string(call) + ": " + why);
              expect_mismatch(s, why, "earlier small bcasts", "the full check");
            }
            failed_at = call;
          }
          RANK_CHECK(failed_at == 3 || (me == 0 && failed_at == 4),
                     "the full check did not fail (last failure at call " +
                         std::to_string(failed_at) + ")");
          return 0;
        },
        light_options("4")));
  }
}

// A light bcast against an allreduce, then bcasts alone (IBCOLL_FULL_CHECK_EVERY=4): the
// allreduce's rank fails the first call, and then every rank exactly one of the bcasts, the first
// checked in full (its root a call later, as a returned-early root does), whose digest of the light
// calls before it differs; the ranks still agree which calls are full (by the call's number), so
// every later bcast works: none fails again for the light call the allreduce's rank never made.
TEST(LightBcast, AfterALightBcastAgainstAnAllreduceOneFullCheckFailsThenAllWork) {
  expect_all_ok(run_ranks(
      3,
      [](int me, int n) {
        CapiRank r;
        std::vector<int32_t> data(16, 1);
        const ibcoll_status_t first =
            me == n - 1 ? ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), 16, IBCOLL_INT32,
                                           IBCOLL_SUM, r.world())
                        : ibcoll_bcast(data.data(), 16, IBCOLL_INT32, 0, r.world());
        // The allreduce's rank fails; the bcast's may have had what they needed.
        if (me == n - 1 || first != IBCOLL_SUCCESS)
          expect_mismatch(first, ibcoll_last_error(), "collective", "the mismatched call");
        std::vector<int> failed;
        for (int call = 0; call < 12; ++call) {
          std::vector<int64_t> values(4, me == 0 ? call : -1);
          const ibcoll_status_t s = ibcoll_bcast(values.data(), 4, IBCOLL_INT64, 0, r.world());
          if (s != IBCOLL_SUCCESS) {
            expect_mismatch(s, ibcoll_last_error(), "earlier small bcasts",
                            "bcast " + std::to_string(call));
            failed.push_back(call);
            continue;
          }
          RANK_CHECK(values == std::vector<int64_t>(4, call), "bcast " + std::to_string(call));
        }
        std::string calls;
        for (int call : failed)
          calls += " " + std::to_string(call);
        RANK_CHECK(failed.size() == 1 && failed[0] <= 4,
                   "the bcasts that failed after the mismatch:" + calls);
        return 0;
      },
      light_options("4")));
}

// A root that comes to its bcast late (five probe intervals) is slow, not mismatched: the
// receivers probe it, it does not answer (its call agrees, once made), and they get its vector.
TEST(LightBcast, ASlowRootIsWaitedFor) {
  expect_all_ok(run_ranks(
      4,
      [](int me, int) {
        CapiRank r;
        std::vector<int32_t> data(32, me == 2 ? 7 : 0);
        if (me == 2) std::this_thread::sleep_for(std::chrono::seconds(1));
        RANK_CHECK(ibcoll_bcast(data.data(), 32, IBCOLL_INT32, 2, r.world()) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        RANK_CHECK(data == std::vector<int32_t>(32, 7), "the slow root's vector");
        int64_t x = 1;
        RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &x, 1, IBCOLL_INT64, IBCOLL_SUM, r.world()) ==
                           IBCOLL_SUCCESS &&
                       x == 4,
                   std::string("the next call: ") + ibcoll_last_error());
        return 0;
      },
      light_options()));
}

}  // namespace
}  // namespace ibcoll::testing
