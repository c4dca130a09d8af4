// The fault matrix: a rank killed (SIGKILL) at a seeded random point of a collective, for every
// algorithm that can run where the test runs, on 4 ranks. On the host the ranks share memory
// (the hierarchical ones run between two pretend nodes of two ranks, over UCX's tcp); in the VM
// (rxe.FaultMatrix, IBCOLL_TRANSPORT=verbs) every message goes over verbs, and the algorithms of
// the shared slots cannot run there.
//
// The point is drawn from the seed: which rank dies (a bcast's root too), after how many calls,
// how far into its call (a fraction of its last call's time: the call may have ended, leaving a
// rank that dies between calls), the size, and whether node-local messages are read straight
// from the sender (CMA) or go through the rings. Every survivor must get IBCOLL_ERR_PEER_FAILED
// naming the dead rank within seconds of its death, and no error before it; its calls that
// succeed are right; its next call fails at once; nothing lands in its buffer after the failed
// call returned; it finalizes, and leaves no descriptor open; no shared-memory file of the run
// is left. Each case prints how to
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
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/collectives.h"
#include "tests/support/directory_entries.h"

namespace ibcoll::testing {
namespace {

using Clock = std::chrono::steady_clock;
using collectives::Algorithm;
using collectives::Collective;

constexpr int kRanks = 4;
constexpr int kMoreCalls = 20;  // calls a survivor makes after the fatal one, at most
// From the death to every survivor's error: over shared memory the dead process is seen at
// once, over a network after a keepalive's silence and the probe that follows it.
constexpr auto kNoticedWithin = std::chrono::seconds(20);

struct FaultPoint {
  int victim = 0, root = 0;
  int calls_before = 0;    // calls the victim completes before the fatal one
  double into_call = 0.0;  // how far into the fatal call the victim dies (of its last call's time)
  size_t count = 0;        // float64 elements for allreduce, bytes for bcast
  bool single_copy = false;

  std::string describe() const {
    return "rank " + std::to_string(victim) + " dies in call " + std::to_string(calls_before) +
           ", " + std::to_string(static_cast<int>(into_call * 100)) + "% into it, count " +
           std::to_string(count) + ", root " + std::to_string(root) +
           (single_copy ? ", single copy" : ", rings");
  }
};

// The sizes a draw takes from: small (eager, checked calls riding the check), medium, and
// large (rendezvous, pipelined segments), within what the algorithm takes.
FaultPoint draw(uint64_t seed, const Algorithm& a) {
  std::mt19937_64 generator(seed);
  auto below = [&](uint64_t n) { return static_cast<int>(generator() % n); };
  const bool allreduce = a.collective == Collective::allreduce;
  const size_t element = allreduce ? sizeof(double) : 1;
  const bool reads_straight = std::string(a.name) == "single_copy";
  std::vector<size_t> counts;
  for (size_t c : allreduce ? std::vector<size_t>{1, 1000, 65537, 262144}
                            : std::vector<size_t>{100, 8000, 65537, size_t{2} << 20}) {
    if (c * element <= a.max_bytes && (!reads_straight || c * element >= (64 << 10)))
      counts.push_back(c);
  }
  FaultPoint p;
  p.victim = below(kRanks);
  p.root = allreduce ? 0 : below(kRanks);
  p.calls_before = 1 + below(3);
  p.into_call = static_cast<double>(below(1250)) / 1000.0;
  p.count = counts[static_cast<size_t>(below(counts.size()))];
  p.single_copy = reads_straight || below(2) == 1;
  return p;
}

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

// One call of the case's collective on `buffer` (the allreduce's result; its input is `input`),
// blocking or, for the victim, started only.
ibcoll_status_t call(const Algorithm& a, const FaultPoint& p, const std::vector<double>& input,
                     std::vector<std::byte>& buffer, ibcoll_comm_t world,
                     ibcoll_request_t* request = nullptr) {
  if (a.collective == Collective::allreduce) {
    auto* out = reinterpret_cast<double*>(buffer.data());
    return request
               ? ibcoll_iallreduce(input.data(), out, p.count, IBCOLL_FLOAT64, IBCOLL_SUM, world,
                                   request)
               : ibcoll_allreduce(input.data(), out, p.count, IBCOLL_FLOAT64, IBCOLL_SUM, world);
  }
  return request ? ibcoll_ibcast(buffer.data(), p.count, IBCOLL_UINT8, p.root, world, request)
                 : ibcoll_bcast(buffer.data(), p.count, IBCOLL_UINT8, p.root, world);
}

// The victim: its calls before, then the fatal one started and driven for its share of the
// last call's time, then death (its time written first, for the survivors' measure).
[[noreturn]] void die_at_the_point(const Algorithm& a, const FaultPoint& p, ibcoll_comm_t world,
                                   std::vector<double>& input, std::vector<std::byte>& buffer,
                                   const std::string& death_file) {
  Clock::duration last{};
  for (int i = 0; i < p.calls_before; ++i) {
    const auto start = Clock::now();
    RANK_CHECK(call(a, p, input, buffer, world) == IBCOLL_SUCCESS, ibcoll_last_error());
    last = Clock::now() - start;
  }
  ibcoll_request_t request = nullptr;
  RANK_CHECK(call(a, p, input, buffer, world, &request) == IBCOLL_SUCCESS, ibcoll_last_error());
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(last * p.into_call);
  int done = 0;
  while (!done && Clock::now() < until)
    ibcoll_test(request, &done);
  std::ofstream(death_file) << now_ns() << "\n";
  raise(SIGKILL);
  std::abort();
}

// Fails the rank unless the bytes of `buffer` stay `mark` for 300 ms of progress: nothing of a
// call that returned may land there any more (a late message delivered, a late RDMA write).
void expect_left_alone(ibcoll_context_t context, std::vector<std::byte>& buffer) {
  constexpr auto kMark = std::byte{0x5A};
  std::fill(buffer.begin(), buffer.end(), kMark);
  for (const auto until = Clock::now() + std::chrono::milliseconds(300); Clock::now() < until;)
    ibcoll_progress(context);
  for (size_t i = 0; i < buffer.size(); ++i)
    RANK_CHECK(buffer[i] == kMark,
               "byte " + std::to_string(i) + " of the buffer changed after its call had failed");
}

// A survivor: calls until one fails (at most kMoreCalls after the fatal one; then an allreduce
// of the world, which needs the dead rank), checking every result before; the failure must name
// the dead rank and come within kNoticedWithin of its death. Writes how long it took.
void survive(const Algorithm& a, const FaultPoint& p, ibcoll_context_t context, ibcoll_comm_t world,
             int me, std::vector<double>& input, std::vector<std::byte>& buffer,
             const std::vector<std::byte>& want, const std::string& death_file,
             const std::string& report_file) {
  ibcoll_status_t status = IBCOLL_SUCCESS;
  int made = 0;
  for (; made <= p.calls_before + kMoreCalls && status == IBCOLL_SUCCESS; ++made) {
    if (a.collective == Collective::allreduce || me != p.root)
      std::fill(buffer.begin(), buffer.end(), std::byte{0xEE});
    status = call(a, p, input, buffer, world);
    RANK_CHECK(status != IBCOLL_SUCCESS || buffer == want,
               "call " + std::to_string(made) + " succeeded with a wrong result");
  }
  if (status == IBCOLL_SUCCESS) {
    int64_t one = 1;
    status = ibcoll_allreduce(IBCOLL_IN_PLACE, &one, 1, IBCOLL_INT64, IBCOLL_SUM, world);
    RANK_CHECK(status != IBCOLL_SUCCESS,
               "an allreduce of the world succeeded without its dead rank");
  }
  const int64_t failed_at = now_ns();
  expect_dead_rank_named(status, p.victim, "the first failed call");
  int64_t died_at = 0;
  std::ifstream(death_file) >> died_at;
  // Not before: a call the victim had ended may still fail (a bcast's root returns before its
  // members have its data, and a call with a member known dead fails), but nothing fails while
  // every rank lives.
  RANK_CHECK(died_at > 0 && died_at <= failed_at,
             std::string("a call failed before the death: ") + ibcoll_last_error());
  const auto noticed = std::chrono::nanoseconds(failed_at - died_at);
  RANK_CHECK(
      noticed < kNoticedWithin,
      "the death was noticed after " +
          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(noticed).count()) +
          " ms");
  expect_left_alone(context, buffer);
  const auto again = Clock::now();
  RANK_CHECK(call(a, p, input, buffer, world) == IBCOLL_ERR_PEER_FAILED,
             std::string("the call after the failure: ") + ibcoll_last_error());
  RANK_CHECK(Clock::now() - again < std::chrono::seconds(2),
             "the call after the failure waited, as if the dead rank could still answer");
  std::ofstream(report_file)
      << std::chrono::duration_cast<std::chrono::milliseconds>(noticed).count() << "\n";
}

// What every rank's call leaves in its buffer: the reduced inputs, or the root's bytes.
std::vector<std::byte> expected(const Algorithm& a, const FaultPoint& p) {
  if (a.collective == Collective::allreduce)
    return reference(DataType::float64, ReduceOp::sum, kRanks, p.count);
  std::vector<std::byte> bytes(p.count);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = pattern(p.root, p.count, i);
  return bytes;
}

// One case: 4 ranks, `a` forced, one killed at `p`. In the test process; says how long the
// survivors took to notice.
std::string run_case(const Algorithm& a, const FaultPoint& p, uint64_t seed) {
  const std::string run =
      "/tmp/ibcoll-fault-" + std::to_string(getpid()) + "-" + std::to_string(seed);
  const std::string death_file = run + "-death";
  RankOptions options;
  options.deadline = std::chrono::seconds(150);
  options.environment = {
      {a.collective == Collective::allreduce ? "IBCOLL_ALLREDUCE_ALGO" : "IBCOLL_BCAST_ALGO",
       a.name},
      {"IBCOLL_TIMEOUT", "60s"},
      {"IBCOLL_SHM_SINGLE_COPY", p.single_copy ? "4K" : "0"}};
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
        const ibcoll_collective_t collective =
            a.collective == Collective::allreduce ? IBCOLL_ALLREDUCE : IBCOLL_BCAST;
        const ibcoll_datatype_t type =
            a.collective == Collective::allreduce ? IBCOLL_FLOAT64 : IBCOLL_UINT8;
        expect_algorithm(world, collective, p.count, type, a.name);
        std::vector<double> input(p.count);
        const auto mine = testing::input(DataType::float64, ReduceOp::sum, me, p.count);
        if (a.collective == Collective::allreduce)
          std::memcpy(input.data(), mine.data(), mine.size());
        const std::vector<std::byte> want = expected(a, p);
        std::vector<std::byte> buffer(want.size());
        if (a.collective == Collective::bcast && me == p.root) buffer = want;
        if (me == p.victim) die_at_the_point(a, p, world, input, buffer, death_file);
        survive(a, p, context, world, me, input, buffer, want, death_file,
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
    noticed += (noticed.empty() ? "" : ", ") + line + " ms";
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
      const FaultPoint p = draw(seed * 1000 + index, a);
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

}  // namespace
}  // namespace ibcoll::testing
