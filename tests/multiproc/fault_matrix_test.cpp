// The fault matrix: a rank killed (SIGKILL) at a seeded random point of a collective, for every
// algorithm that can run where the test runs, on 4 ranks. On the host the ranks share memory
// (the hierarchical ones run between two pretend nodes of two ranks, over UCX's tcp); in the VM
// (rxe.FaultMatrix, IBCOLL_TRANSPORT=verbs) every message goes over verbs, and the algorithms of
// the shared slots cannot run there.
//
// The point is drawn from the seed (tests/support/fault_point.h). Every survivor must get
// IBCOLL_ERR_PEER_FAILED naming the dead rank within seconds of its death, and no error before
// it; its calls that succeed are right; its next call fails at once; nothing lands in its
// buffer after the failed call returned; it then shrinks the world with the others, which all
// hold the victim failed and it alone, and the case goes on among the three, right; it finalizes,
// and leaves no descriptor open; no shared-memory file of the run is left. Each case prints how to
// replay it (FAULT_SEED=N FAULT_ONLY='allreduce ring'); FAULT_ROUNDS=N draws N points per
// algorithm, from seeds N in a row (CI: 1, from a random seed).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/collectives.h"
#include "tests/support/directory_entries.h"
#include "tests/support/fault_point.h"

namespace ibcoll::testing {
namespace {

using Clock = std::chrono::steady_clock;
using collectives::Algorithm;

constexpr int kRanks = 4;
// From the death to every survivor's error: over shared memory the dead process is seen at
// once, over a network after a keepalive's silence and the probe that follows it.
constexpr auto kNoticedWithin = std::chrono::seconds(20);

uint64_t first_seed() {
  if (const char* s = std::getenv("FAULT_SEED")) return std::strtoull(s, nullptr, 0);
  return (uint64_t{std::random_device{}()} << 32) | std::random_device{}();
}

int rounds() {
  const char* s = std::getenv("FAULT_ROUNDS");
  return s ? std::max(1, std::atoi(s)) : 1;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// A survivor: its failure must come after the death (its time in `death_file`), within
// kNoticedWithin of it; then it shrinks the world and goes on with the rest. Writes how long
// after the death it noticed, and how long its shrink and first call among the rest took.
void survive_and_report(const Algorithm& a, const FaultPoint& p, ibcoll_context_t context,
                        ibcoll_comm_t world, int me, const std::vector<double>& input,
                        std::vector<std::byte>& buffer, const std::vector<std::byte>& want,
                        const std::string& death_file, const std::string& report_file) {
  const Survival s = survive(a, p, context, world, me, input, buffer, want);
  const int64_t failed_at =
      std::chrono::duration_cast<std::chrono::nanoseconds>(s.failed_at.time_since_epoch()).count();
  int64_t died_at = 0;
  std::ifstream(death_file) >> died_at;
  // Not before: a call the victim had ended may still fail (a bcast's root returns before its
  // members have its data, and a call with a member known dead fails), but nothing fails while
  // every rank lives.
  RANK_CHECK(died_at > 0 && died_at <= failed_at, "a call failed before the death: " + s.error);
  const auto noticed = std::chrono::nanoseconds(failed_at - died_at);
  RANK_CHECK(
      noticed < kNoticedWithin,
      "the death was noticed after " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(noticed).count()) +
          " ms");
  std::vector<int> everyone(kRanks);
  std::iota(everyone.begin(), everyone.end(), 0);
  const auto went_on = shrink_and_go_on(a, p, world, everyone, me);
  std::ofstream(report_file)
      << std::chrono::duration_cast<std::chrono::milliseconds>(noticed).count()
      << " ms, then shrink and a first call "
      << std::chrono::duration_cast<std::chrono::milliseconds>(went_on).count() << " ms\n";
}

// One case: 4 ranks, `a` forced, one killed at `p`. In the test process; says how long the
// survivors took to notice.
std::string run_case(const Algorithm& a, const FaultPoint& p, uint64_t seed) {
  const std::string run =
      "/tmp/ibcoll-fault-" + std::to_string(getpid()) + "-" + std::to_string(seed);
  const std::string death_file = run + "-death";
  RankOptions options;
  options.deadline = std::chrono::seconds(150);
  options.environment = fault_case_environment(a, p);
  options.environment["IBCOLL_TIMEOUT"] = "60s";
  const bool pretend_nodes = a.across_nodes;  // 2 + 2
  std::vector<int> survivors;
  for (int r = 0; r < kRanks; ++r)
    if (r != p.victim) survivors.push_back(r);
  if (pretend_nodes && !std::getenv("IBCOLL_TRANSPORT") && !std::getenv("UCX_TLS"))
    options.environment["UCX_TLS"] = "tcp";
  const auto shm_before = directory_entries("/dev/shm", "ibcoll-");
  const auto exits = run_ranks(
      kRanks,
      [&](int me, int) {
        if (pretend_nodes)
          setenv("IBCOLL_NODE", me < kRanks / 2 ? "fault-node-0" : "fault-node-1", 1);
        const auto fds = directory_entries("/proc/self/fd");
        ibcoll_context_t context = nullptr;
        ibcoll_comm_t world = nullptr;
        RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
        RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
        FaultCase c = enter_fault_case(a, p, world, me, kRanks);
        if (me == p.victim) {
          die_at_the_point(a, p, world, c.input, c.buffer,
                           [&] { std::ofstream(death_file) << now_ns() << "\n"; });
        }
        survive_and_report(a, p, context, world, me, c.input, c.buffer, c.want, death_file,
                           run + "-rank-" + std::to_string(me));
        meet_without_ibcoll("fault-" + std::to_string(seed), me, survivors);
        RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
        RANK_CHECK(directory_entries("/proc/self/fd") == fds, "descriptors were left open");
        return 0;
      },
      options);
  std::string noticed;
  for (int r : survivors) {
    std::string line;
    std::getline(std::ifstream(run + "-rank-" + std::to_string(r)), line);
    noticed += (noticed.empty() ? "" : "; ") + line;
    std::filesystem::remove(run + "-rank-" + std::to_string(r));
  }
  meeting_over("fault-" + std::to_string(seed), survivors);
  std::filesystem::remove(death_file);
  EXPECT_EQ(exits[static_cast<size_t>(p.victim)].signal, SIGKILL) << describe(exits);
  for (int r : survivors)
    EXPECT_TRUE(exits[static_cast<size_t>(r)].ok()) << describe(exits);
  for (const std::string& name : directory_entries("/dev/shm", "ibcoll-"))
    EXPECT_TRUE(std::find(shm_before.begin(), shm_before.end(), name) != shm_before.end())
        << "/dev/shm/" << name << " was left behind";
  return "survivors noticed after " + noticed;
}

// Why `a` cannot run here on 4 ranks (those across nodes on pretend nodes), or empty.
std::string why_not_here(const Algorithm& a) {
  const char* forced = std::getenv("IBCOLL_TRANSPORT");
  const bool messages_only = forced && std::string(forced) != "auto";
  if (a.uses_slots && messages_only)
    return std::string("the shared slots are not used under IBCOLL_TRANSPORT=") + forced;
#if !defined(IBCOLL_HAVE_UCX) && !defined(IBCOLL_HAVE_VERBS)
  if (a.across_nodes) return "no network transport between pretend nodes in this build";
#endif
#if !defined(IBCOLL_HAVE_UCX)
  if (a.across_nodes && !messages_only)
    return "no UCX in this build for the network between pretend nodes on the host";
#endif
  return "";
}

TEST(FaultMatrix, ARankKilledAtASeededPointOfEveryAlgorithmFailsEverySurvivor) {
  const uint64_t first = first_seed();
  const char* only = std::getenv("FAULT_ONLY");
  int cases = 0;
  for (int round = 0; round < rounds(); ++round) {
    const uint64_t seed = first + static_cast<uint64_t>(round);
    const auto all = collectives::algorithms();
    for (size_t index = 0; index < all.size(); ++index) {
      const Algorithm& a = all[index];
      const std::string name =
          std::string(collectives::collective_name(a.collective)) + " " + a.name;
      if (only && name != only) continue;
      if (const std::string why_not = why_not_here(a); !why_not.empty()) {
        if (round == 0) std::cout << name << ": left out: " << why_not << std::endl;
        continue;
      }
      const FaultPoint p = draw_fault_point(seed * 1000 + index, a, kRanks);
      const std::string replay =
          "FAULT_SEED=" + std::to_string(seed) + " FAULT_ONLY='" + name + "' replays it";
      SCOPED_TRACE(name + ": " + p.describe() + "; " + replay);
      const auto start = Clock::now();
      const std::string noticed = run_case(a, p, seed * 1000 + index);
      ++cases;
      std::cout
          << name << ": " << p.describe() << ": " << noticed << " ("
          << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count()
          << " ms; " << replay << ")" << std::endl;
    }
  }
  std::cout << cases << " faults" << std::endl;
  EXPECT_GT(cases, 0);
}

// A QP forced into error mid-collective: one rank (IBCOLL_FAULT=qp-error:N, the rank and N
// drawn from the seed) moves the QP of its Nth work request into error right after posting it.
// What it had posted there flushes back, so its own call fails; its peer's next message or
// keepalive finds nobody answering, takes it for gone and tells the others. Every rank's call
// must fail as a lost peer within kNoticedWithin of its start (no hang, no wait for the
// deadline), its results right until then, nothing landing in its buffer after; each finalizes.
TEST(FaultMatrix, AQpForcedIntoErrorMidCollectiveFailsEveryRank) {
  const char* transport = std::getenv("IBCOLL_TRANSPORT");
  if (!transport || std::string(transport) != "verbs")
    GTEST_SKIP() << "needs every message over verbs: IBCOLL_TRANSPORT=verbs (rxe.FaultMatrix)";
  const uint64_t seed = first_seed();
  std::mt19937_64 generator(seed);
  const int faulty = static_cast<int>(generator() % kRanks);
  const uint64_t after = 20 + generator() % 300;
  std::cout << "rank " << faulty << "'s work request " << after
            << " goes into error (FAULT_SEED=" << seed << " replays it)" << std::endl;
  RankOptions options;
  options.deadline = std::chrono::seconds(150);
  options.environment = {{"IBCOLL_TIMEOUT", "60s"}};
  const auto exits = run_ranks(
      kRanks,
      [&](int me, int) {
        if (me == faulty) setenv("IBCOLL_FAULT", ("qp-error:" + std::to_string(after)).c_str(), 1);
        ibcoll_context_t context = nullptr;
        ibcoll_comm_t world = nullptr;
        RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
        RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
        constexpr size_t kCount = 65537;  // float64: rendezvous-sized pieces for most algorithms
        const auto input = testing::input(DataType::float64, ReduceOp::sum, me, kCount);
        const auto want = reference(DataType::float64, ReduceOp::sum, kRanks, kCount);
        std::vector<std::byte> buffer(want.size());
        ibcoll_status_t status = IBCOLL_SUCCESS;
        int call = 0;
        auto start = Clock::now();
        for (; call < 1000 && status == IBCOLL_SUCCESS; ++call) {
          start = Clock::now();
          status = ibcoll_allreduce(input.data(), buffer.data(), kCount, IBCOLL_FLOAT64, IBCOLL_SUM,
                                    world);
          RANK_CHECK(status != IBCOLL_SUCCESS || buffer == want,
                     "call " + std::to_string(call) + " succeeded with a wrong result");
        }
        const auto took = Clock::now() - start;
        const std::string error = ibcoll_last_error();
        RANK_CHECK(status == IBCOLL_ERR_PEER_FAILED,
                   std::string("the call ended with ") + ibcoll_status_name(status) + ": " + error);
        RANK_CHECK(took < kNoticedWithin,
                   "the failure took " +
                       std::to_string(
                           std::chrono::duration_cast<std::chrono::milliseconds>(took).count()) +
                       " ms: " + error);
        std::printf("rank %d: call %d failed after %lld ms: %s\n", me, call - 1,
                    static_cast<long long>(
                        std::chrono::duration_cast<std::chrono::milliseconds>(took).count()),
                    error.c_str());
        expect_left_alone(context, buffer);
        RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
        return 0;
      },
      options);
  expect_all_ok(exits);
}

}  // namespace
}  // namespace ibcoll::testing
