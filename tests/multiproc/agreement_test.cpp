// Agreeing and shrinking after failures (ibcoll_comm_agree, ibcoll_comm_failed_ranks,
// ibcoll_comm_shrink) between forked ranks: with no failure every member gets the AND of the
// flags; a rank dead before, or killed at a seeded point inside the agreement itself, is held
// failed alike by every survivor, which then go on, right, on the shrunken communicator; a rank
// stopped past the deadline is fenced out, told so, and cannot disturb the others.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/shrinking.h"

namespace ibcoll::testing {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string listed(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks)
    text += (text.empty() ? "" : ",") + std::to_string(r);
  return "{" + text + "}";
}

// A sum of floats over `comm` whose members hold their rank in the world: right when every
// member of `comm` is the job rank `members` says, in order.
void expect_sum_over(ibcoll_comm_t comm, const std::vector<int>& members, int world_rank,
                     size_t count, const std::string& what) {
  std::vector<float> data(count, static_cast<float>(world_rank + 1)), out(count, -1.0f);
  RANK_CHECK(ibcoll_allreduce(data.data(), out.data(), count, IBCOLL_FLOAT32, IBCOLL_SUM, comm) ==
                 IBCOLL_SUCCESS,
             what + ": " + ibcoll_last_error());
  float want = 0;
  for (int m : members)
    want += static_cast<float>(m + 1);
  RANK_CHECK(out.front() == want && out.back() == want,
             what + ": the sum is " + std::to_string(out.back()) + ", not " + std::to_string(want));
}

// 8 ranks, 20 agreements in a row on the world and then on each half: every member comes out
// with the AND of all flags, IBCOLL_SUCCESS and no failed member.
TEST(Agree, WithNoFailureEveryMemberGetsTheAndOfTheFlags) {
  expect_all_ok(run_ranks(8, [](int me, int n) {
    CapiRank r;
    ibcoll_comm_t half = nullptr;
    RANK_CHECK(ibcoll_comm_split(r.world(), me % 2, me, &half) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    for (int round = 0; round < 20; ++round) {
      for (ibcoll_comm_t comm : {r.world(), half}) {
        const int members = comm_size(comm);
        int flags = ~(1 << ((me + round) % n));
        RANK_CHECK(ibcoll_comm_agree(comm, &flags) == IBCOLL_SUCCESS, ibcoll_last_error());
        int want = ~0;
        for (int m = 0; m < n; ++m) {
          if (comm == r.world() || m % 2 == me % 2) want &= ~(1 << ((m + round) % n));
        }
        RANK_CHECK(flags == want, "round " + std::to_string(round) + " on " +
                                      std::to_string(members) + " ranks: flags " +
                                      std::to_string(flags) + ", not " + std::to_string(want));
        RANK_CHECK(agreed_failed(comm).empty(), "a failed member where none failed");
      }
    }
    RANK_CHECK(ibcoll_comm_free(&half) == IBCOLL_SUCCESS, ibcoll_last_error());
    return 0;
  }));
}

// 6 ranks; rank 4 dies after the first allreduce. The survivors' next call fails; each then
// agrees, with rank 4 held failed by all and the AND of the survivors' flags; they shrink, and
// the new communicator of 5 runs allreduces and bcasts of every size the table picks an
// algorithm for, right and the same bits everywhere.
TEST(Shrink, SurvivorsOfADeathAgreeAndGoOn) {
  constexpr int kVictim = 4;
  const std::vector<RankExit> exits = run_ranks(6, [](int me, int n) {
    CapiRank r;
    expect_sum_over(r.world(), {0, 1, 2, 3, 4, 5}, me, 16, "the first call");
    if (me == kVictim) raise(SIGKILL);
    std::vector<float> data(1024, 1.0f);
    const ibcoll_status_t status = ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), data.size(),
                                                    IBCOLL_FLOAT32, IBCOLL_SUM, r.world());
    expect_dead_rank_named(status, kVictim, "the call after the death");
    int flags = me == 1 ? 0x5 : 0x7;
    RANK_CHECK(ibcoll_comm_agree(r.world(), &flags) == IBCOLL_ERR_PEER_FAILED,
               std::string("agree: ") + ibcoll_last_error());
    RANK_CHECK(flags == 0x5, "agreed flags " + std::to_string(flags));
    RANK_CHECK(agreed_failed(r.world()) == std::vector<int>{kVictim},
               "the failed ranks are " + listed(agreed_failed(r.world())));
    ibcoll_comm_t rest = nullptr;
    RANK_CHECK(ibcoll_comm_shrink(r.world(), &rest) == IBCOLL_SUCCESS, ibcoll_last_error());
    RANK_CHECK(
        comm_size(rest) == n - 1 && comm_rank(rest) == (me < kVictim ? me : me - 1),
        "rank " + std::to_string(comm_rank(rest)) + " of " + std::to_string(comm_size(rest)));
    RANK_CHECK(agreed_failed(r.world()) == std::vector<int>{kVictim}, "shrink's failed ranks");
    allreduce_sweep(rest, {DataType::float32, DataType::int64},
                    {1, 7, 1000, 16 * 1024, 300 * 1024});
    bcast_every_root(rest, DataType::uint8, {1, 4096, 200 * 1024});
    std::vector<float> rounding = rounding_input(me, 64 * 1024);
    RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, rounding.data(), rounding.size(), IBCOLL_FLOAT32,
                                IBCOLL_SUM, rest) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    expect_same_everywhere(rest, rounding.data(), rounding.size() * sizeof(float),
                           "a rounding sum on the shrunken communicator");
    RANK_CHECK(ibcoll_comm_free(&rest) == IBCOLL_SUCCESS, ibcoll_last_error());
    return 0;
  });
  for (int rank = 0; rank < 6; ++rank) {
    if (rank == kVictim) {
      EXPECT_EQ(exits[kVictim].signal, SIGKILL) << describe(exits);
    } else {
      EXPECT_TRUE(exits[static_cast<size_t>(rank)].ok()) << describe(exits);
    }
  }
}

// Seeded: one of 6 ranks (the first live member, which leads, half the time) is killed right
// after its Nth agreement message (IBCOLL_FAULT=agreement-exit:N), inside the shrink itself;
// AGREE_ROUNDS rounds (6), from a printed seed (AGREE_SEED replays it).
// The survivors shrink until a communicator of them serves a call (the victim may have died
// only once the first shrink had decided without it: it dies then, at the latest), and all hold
// the same failed set.
TEST(Shrink, ARankKilledInsideTheAgreementLeavesTheSurvivorsAgreed) {
  const char* seed_setting = std::getenv("AGREE_SEED");
  const uint64_t seed = seed_setting ? std::strtoull(seed_setting, nullptr, 10)
                                     : static_cast<uint64_t>(std::random_device{}());
  std::printf("AGREE_SEED=%llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 draw(seed);
  const char* rounds_setting = std::getenv("AGREE_ROUNDS");
  const int rounds = rounds_setting ? std::max(1, std::atoi(rounds_setting)) : 6;
  for (int round = 0; round < rounds; ++round) {
    const int victim = draw() % 2 == 0 ? 0 : static_cast<int>(draw() % 6);
    const int after = 1 + static_cast<int>(draw() % 3);
    SCOPED_TRACE("round " + std::to_string(round) + ": rank " + std::to_string(victim) +
                 " killed after agreement message " + std::to_string(after));
    const std::vector<RankExit> exits = run_ranks(6, [victim, after](int me, int n) {
      if (me == victim)
        setenv("IBCOLL_FAULT", ("agreement-exit:" + std::to_string(after)).c_str(), 1);
      CapiRank r;
      std::vector<int> everyone(static_cast<size_t>(n));
      std::iota(everyone.begin(), everyone.end(), 0);
      // A victim that sent fewer messages dies all the same, once its shrink returned.
      Shrunk s = shrink_until_it_serves(r.world(), everyone, [&] {
        if (me == victim) raise(SIGKILL);
      });
      RANK_CHECK(s.held_failed == std::vector<int>{victim},
                 "the agreements held " + listed(s.held_failed) + " failed");
      expect_same_everywhere(s.comm, s.held_failed.data(), s.held_failed.size() * sizeof(int),
                             "the failed sets agreed");
      expect_sum_over(s.comm, s.members, me, 4096, "the survivors' communicator");
      ibcoll_comm_free(&s.comm);
      return 0;
    });
    for (int rank = 0; rank < 6; ++rank) {
      if (rank == victim) {
        EXPECT_EQ(exits[static_cast<size_t>(victim)].signal, SIGKILL) << describe(exits);
      } else {
        EXPECT_TRUE(exits[static_cast<size_t>(rank)].ok()) << describe(exits);
      }
    }
  }
}

// 4 ranks with a 2 s deadline. Rank 2 stops itself (SIGSTOP) between two calls for 7 s; the
// others' call times out, their shrink fences rank 2 out (it said nothing for 2 s) and they go
// on as 3, right, while rank 2 wakes: each of its calls fails, with IBCOLL_ERR_FENCED naming who
// declared it failed within seconds, its shrink too, and the others' results stay right.
TEST(Fence, ARankStoppedPastTheDeadlineIsFencedOutAndCannotDisturbTheOthers) {
  constexpr int kStopped = 2;
  RankOptions options;
  options.environment = {{"IBCOLL_TIMEOUT", "2s"}};
  expect_all_ok(run_ranks(
      4,
      [](int me, int n) {
        CapiRank r;
        for (int call = 0; call < 3; ++call)
          expect_sum_over(r.world(), {0, 1, 2, 3}, me, 16, "a call before the stop");
        std::vector<float> data(16, 1.0f);
        if (me == kStopped) {
          const pid_t self = getpid();
          if (fork() == 0) {  // wakes the rank up 7 s from now
            std::this_thread::sleep_for(std::chrono::seconds(7));
            kill(self, SIGCONT);
            _exit(0);
          }
          raise(SIGSTOP);
          // Its first call may find every contribution in place in the slots (the others made
          // theirs before they gave up), and succeed with them; then it polls, and hears.
          const Clock::time_point woke = Clock::now();
          ibcoll_status_t s = IBCOLL_SUCCESS;
          for (int call = 0; s != IBCOLL_ERR_FENCED; ++call) {
            std::fill(data.begin(), data.end(), 1.0f);
            s = ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), data.size(), IBCOLL_FLOAT32,
                                 IBCOLL_SUM, r.world());
            RANK_CHECK(s != IBCOLL_SUCCESS || (call == 0 && data[0] == 4.0f),
                       "a fenced rank's call succeeded");
            RANK_CHECK(seconds_since(woke) < 5.0, "not told it was fenced out within 5 s: " +
                                                      std::string(ibcoll_last_error()));
          }
          for (int call = 0; call < 3; ++call) {
            RANK_CHECK(ibcoll_bcast(data.data(), data.size(), IBCOLL_FLOAT32, 0, r.world()) ==
                           IBCOLL_ERR_FENCED,
                       std::string("a later call: ") + ibcoll_last_error());
          }
          RANK_CHECK(
              std::string(ibcoll_last_error()).find("declared failed by rank") != std::string::npos,
              ibcoll_last_error());
          ibcoll_comm_t rest = nullptr;
          RANK_CHECK(ibcoll_comm_shrink(r.world(), &rest) == IBCOLL_ERR_FENCED && !rest,
                     std::string("a fenced rank's shrink: ") + ibcoll_last_error());
        } else {
          const ibcoll_status_t s = ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), data.size(),
                                                     IBCOLL_FLOAT32, IBCOLL_SUM, r.world());
          RANK_CHECK(s == IBCOLL_ERR_TIMEOUT, std::string("the call with rank 2 stopped: ") +
                                                  ibcoll_status_name(s) + ": " +
                                                  ibcoll_last_error());
          ibcoll_comm_t rest = nullptr;
          RANK_CHECK(ibcoll_comm_shrink(r.world(), &rest) == IBCOLL_SUCCESS, ibcoll_last_error());
          RANK_CHECK(agreed_failed(r.world()) == std::vector<int>{kStopped},
                     "the failed ranks are " + listed(agreed_failed(r.world())));
          // Until well after rank 2 woke (7 s after its stop), all three calling alike.
          const Clock::time_point start = Clock::now();
          for (int call = 0;; ++call) {
            int going = seconds_since(start) < 6.0, all_going = 0;
            RANK_CHECK(ibcoll_allreduce(&going, &all_going, 1, IBCOLL_INT32, IBCOLL_MIN, rest) ==
                           IBCOLL_SUCCESS,
                       ibcoll_last_error());
            if (!all_going) break;
            expect_sum_over(rest, {0, 1, 3}, me, call % 2 ? 16 : 64 * 1024, "the three");
          }
          RANK_CHECK(ibcoll_comm_free(&rest) == IBCOLL_SUCCESS, ibcoll_last_error());
        }
        meet_without_ibcoll("fence", me, {0, 1, 2, 3});
        (void)n;
        return 0;
      },
      options));
  meeting_over("fence", {0, 1, 2, 3});
}

}  // namespace
}  // namespace ibcoll::testing
