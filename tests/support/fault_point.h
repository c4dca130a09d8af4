// A rank killed at a seeded point of a collective, and what its survivors must see: shared by
// the fault matrix between forked ranks (host, VM) and across the guests of ci/rxe-cluster.
//
// The point is drawn from the seed: which rank dies (a bcast's root too), after how many calls,
// how far into its call (a fraction of its last call's time: the call may have ended, leaving a
// rank that dies between calls), the size, and whether node-local messages are read straight
// from the sender (CMA) or go through the rings. The victim starts its fatal call and dies
// inside it; a survivor calls until one fails, checking every result before; the failure names
// the dead rank; nothing lands in its buffer afterwards; its next call fails at once. Then the
// survivors shrink the communicator and the case's collective goes on among them, right.
#pragma once

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tests/support/shrinking.h"

namespace ibcoll::testing {

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

// The seed a fault is drawn from across the guests of ci/rxe-cluster: `given` (a replay), or
// one from the job secret, which every rank of a cluster-run job has alike.
inline uint64_t seed_of_the_job(const char* given) {
  if (given) return std::strtoull(given, nullptr, 0);
  const char* secret = std::getenv("IBCOLL_JOB_SECRET");
  RANK_CHECK(secret && *secret, "IBCOLL_JOB_SECRET is not set: run me under ci/cluster-run");
  return fnv1a(secret, std::strlen(secret)) >> 1;
}

inline constexpr int kMoreCallsAfterTheDeath =
    20;  // a survivor's calls after the fatal one, at most

// The sizes a draw takes from: small (eager, checked calls riding the check), medium, and
// large (rendezvous, pipelined segments), within what the algorithm takes; `largest` caps
// them (bytes per rank) where the network is slow.
inline FaultPoint draw_fault_point(uint64_t seed, const collectives::Algorithm& a, int ranks,
                                   size_t largest = SIZE_MAX) {
  std::mt19937_64 generator(seed);
  auto below = [&](uint64_t n) { return static_cast<int>(generator() % n); };
  const bool allreduce = a.collective == collectives::Collective::allreduce;
  const size_t element = allreduce ? sizeof(double) : 1;
  const bool reads_straight = std::string(a.name) == "single_copy";
  std::vector<size_t> counts;
  for (size_t c : allreduce ? std::vector<size_t>{1, 1000, 65537, 262144}
                            : std::vector<size_t>{100, 8000, 65537, size_t{2} << 20}) {
    if (c * element <= std::min(a.max_bytes, largest) &&
        (!reads_straight || c * element >= (64 << 10)))
      counts.push_back(c);
  }
  FaultPoint p;
  p.victim = below(static_cast<uint64_t>(ranks));
  p.root = allreduce ? 0 : below(static_cast<uint64_t>(ranks));
  p.calls_before = 1 + below(3);
  p.into_call = static_cast<double>(below(1250)) / 1000.0;
  p.count = counts[static_cast<size_t>(below(counts.size()))];
  p.single_copy = reads_straight || below(2) == 1;
  return p;
}

// The algorithms that run on a communicator spanning nodes (those of the slots run inside one).
inline std::vector<const collectives::Algorithm*> spanning_algorithms() {
  std::vector<const collectives::Algorithm*> spanning;
  for (const collectives::Algorithm& a : collectives::algorithms())
    if (!a.uses_slots) spanning.push_back(&a);
  return spanning;
}

// The variables a case sets before init: `a` forced, and node-local messages read straight from
// the sender (from 4 KiB) or through the rings.
inline std::map<std::string, std::string> fault_case_environment(const collectives::Algorithm& a,
                                                                 const FaultPoint& p) {
  return {{a.collective == collectives::Collective::allreduce ? "IBCOLL_ALLREDUCE_ALGO"
                                                              : "IBCOLL_BCAST_ALGO",
           a.name},
          {"IBCOLL_SHM_SINGLE_COPY", p.single_copy ? "4K" : "0"}};
}

// One rank's part in a fault case on `comm` of `ranks`: the forced algorithm checked to be the
// one the call runs, the rank's allreduce input (exact in any order), what every rank's call
// leaves (the reduced inputs, or the root's bytes), and the buffer the calls use (a bcast
// root's holds its bytes already).
struct FaultCase {
  std::vector<double> input;
  std::vector<std::byte> want, buffer;
};
inline FaultCase enter_fault_case(const collectives::Algorithm& a, const FaultPoint& p,
                                  ibcoll_comm_t comm, int me, int ranks) {
  const bool allreduce = a.collective == collectives::Collective::allreduce;
  expect_algorithm(comm, allreduce ? IBCOLL_ALLREDUCE : IBCOLL_BCAST, p.count,
                   allreduce ? IBCOLL_FLOAT64 : IBCOLL_UINT8, a.name);
  FaultCase c;
  c.input.resize(p.count);
  if (allreduce) {
    const auto mine = testing::input(DataType::float64, ReduceOp::sum, me, p.count);
    std::memcpy(c.input.data(), mine.data(), mine.size());
    c.want = reference(DataType::float64, ReduceOp::sum, ranks, p.count);
  } else {
    c.want.resize(p.count);
    for (size_t i = 0; i < c.want.size(); ++i)
      c.want[i] = pattern(p.root, p.count, i);
  }
  c.buffer.resize(c.want.size());
  if (!allreduce && me == p.root) c.buffer = c.want;
  return c;
}

// One call of the case's collective on `buffer` (the allreduce's result; its input is `input`),
// blocking or, with `request`, started only.
inline ibcoll_status_t fault_call(const collectives::Algorithm& a, const FaultPoint& p,
                                  const std::vector<double>& input, std::vector<std::byte>& buffer,
                                  ibcoll_comm_t comm, ibcoll_request_t* request = nullptr) {
  if (a.collective == collectives::Collective::allreduce) {
    auto* out = reinterpret_cast<double*>(buffer.data());
    return request ? ibcoll_iallreduce(input.data(), out, p.count, IBCOLL_FLOAT64, IBCOLL_SUM, comm,
                                       request)
                   : ibcoll_allreduce(input.data(), out, p.count, IBCOLL_FLOAT64, IBCOLL_SUM, comm);
  }
  return request ? ibcoll_ibcast(buffer.data(), p.count, IBCOLL_UINT8, p.root, comm, request)
                 : ibcoll_bcast(buffer.data(), p.count, IBCOLL_UINT8, p.root, comm);
}

// The victim: its calls before, then the fatal one started and driven for its share of the
// last call's time, then `last_words` (the host writes its time of death), then death.
[[noreturn]] inline void die_at_the_point(const collectives::Algorithm& a, const FaultPoint& p,
                                          ibcoll_comm_t comm, const std::vector<double>& input,
                                          std::vector<std::byte>& buffer,
                                          const std::function<void()>& last_words) {
  using Clock = std::chrono::steady_clock;
  Clock::duration last{};
  for (int i = 0; i < p.calls_before; ++i) {
    const auto start = Clock::now();
    RANK_CHECK(fault_call(a, p, input, buffer, comm) == IBCOLL_SUCCESS, ibcoll_last_error());
    last = Clock::now() - start;
  }
  ibcoll_request_t request = nullptr;
  RANK_CHECK(fault_call(a, p, input, buffer, comm, &request) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(last * p.into_call);
  int done = 0;
  while (!done && Clock::now() < until)
    ibcoll_test(request, &done);
  last_words();
  raise(SIGKILL);
  std::abort();
}

// Fails the rank unless the bytes of `buffer` stay `mark` for 300 ms of progress: nothing of a
// call that returned may land there any more (a late message delivered, a late RDMA write).
inline void expect_left_alone(ibcoll_context_t context, std::vector<std::byte>& buffer) {
  constexpr auto kMark = std::byte{0x5A};
  std::fill(buffer.begin(), buffer.end(), kMark);
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
       std::chrono::steady_clock::now() < until;)
    ibcoll_progress(context);
  for (size_t i = 0; i < buffer.size(); ++i)
    RANK_CHECK(buffer[i] == kMark,
               "byte " + std::to_string(i) + " of the buffer changed after its call had failed");
}

struct Survival {
  int failed_call = 0;  // the index of the survivor's call that failed
  std::chrono::steady_clock::time_point failed_at;
  double failed_call_seconds = 0;  // from that call's start to its failure
  std::string error;               // its message
};

// A survivor: calls until one fails (at most kMoreCallsAfterTheDeath after the fatal one; then
// an allreduce of the communicator, which needs the dead rank), checking every result before;
// the failure must name the dead rank; then nothing may land in its buffer, and its next call
// must fail at once.
inline Survival survive(const collectives::Algorithm& a, const FaultPoint& p,
                        ibcoll_context_t context, ibcoll_comm_t comm, int me,
                        const std::vector<double>& input, std::vector<std::byte>& buffer,
                        const std::vector<std::byte>& want) {
  using Clock = std::chrono::steady_clock;
  Survival s;
  ibcoll_status_t status = IBCOLL_SUCCESS;
  auto start = Clock::now();
  for (; s.failed_call <= p.calls_before + kMoreCallsAfterTheDeath; ++s.failed_call) {
    if (a.collective == collectives::Collective::allreduce || me != p.root)
      std::fill(buffer.begin(), buffer.end(), std::byte{0xEE});
    start = Clock::now();
    status = fault_call(a, p, input, buffer, comm);
    if (status != IBCOLL_SUCCESS) break;
    RANK_CHECK(buffer == want,
               "call " + std::to_string(s.failed_call) + " succeeded with a wrong result");
  }
  if (status == IBCOLL_SUCCESS) {
    int64_t one = 1;
    start = Clock::now();
    status = ibcoll_allreduce(IBCOLL_IN_PLACE, &one, 1, IBCOLL_INT64, IBCOLL_SUM, comm);
    RANK_CHECK(status != IBCOLL_SUCCESS,
               "an allreduce of the world succeeded without its dead rank");
  }
  s.failed_at = Clock::now();
  s.failed_call_seconds = std::chrono::duration<double>(s.failed_at - start).count();
  s.error = ibcoll_last_error();
  expect_dead_rank_named(status, p.victim, "the first failed call");
  expect_left_alone(context, buffer);
  const auto again = Clock::now();
  RANK_CHECK(fault_call(a, p, input, buffer, comm) == IBCOLL_ERR_PEER_FAILED,
             std::string("the call after the failure: ") + ibcoll_last_error());
  RANK_CHECK(Clock::now() - again < std::chrono::seconds(2),
             "the call after the failure waited, as if the dead rank could still answer");
  return s;
}

// After the failure, a survivor of `comm` (`members`: its job ranks in order) shrinks it: the
// agreement must hold the victim failed, and only it; on the communicator of the rest, the case's
// collective (its algorithm still forced: checked to run) goes on `calls` times, right (a dead
// root's bcast is rank 0's of the rest). How long from the shrink's start the first of them took
// to succeed; the rest is freed.
inline std::chrono::steady_clock::duration shrink_and_go_on(const collectives::Algorithm& a,
                                                            const FaultPoint& p, ibcoll_comm_t comm,
                                                            const std::vector<int>& members, int me,
                                                            int calls = 1) {
  const auto start = std::chrono::steady_clock::now();
  ibcoll_comm_t rest = nullptr;
  RANK_CHECK(ibcoll_comm_shrink(comm, &rest) == IBCOLL_SUCCESS,
             std::string("shrink: ") + ibcoll_last_error());
  const auto victim_at = std::find(members.begin(), members.end(), p.victim) - members.begin();
  RANK_CHECK(agreed_failed(comm) == std::vector<int>{static_cast<int>(victim_at)},
             "the shrink held " + std::to_string(agreed_failed(comm).size()) +
                 " members failed, not the victim alone");
  std::vector<int> kept;
  for (int m : members)
    if (m != p.victim) kept.push_back(m);
  RANK_CHECK(comm_size(rest) == static_cast<int>(kept.size()) &&
                 kept[static_cast<size_t>(comm_rank(rest))] == me,
             "the shrunken communicator does not hold the survivors in their order");
  const bool allreduce = a.collective == collectives::Collective::allreduce;
  const int root =
      p.root == p.victim
          ? 0
          : static_cast<int>(std::find(kept.begin(), kept.end(), p.root) - kept.begin());
  std::vector<double> input(p.count);
  std::vector<std::byte> want;
  if (allreduce) {
    auto mine = testing::input(DataType::float64, ReduceOp::sum, me, p.count);
    std::memcpy(input.data(), mine.data(), mine.size());
    want = testing::input(DataType::float64, ReduceOp::sum, kept.front(), p.count);
    for (size_t k = 1; k < kept.size(); ++k) {
      collectives::reduce(want.data(),
                          testing::input(DataType::float64, ReduceOp::sum, kept[k], p.count).data(),
                          p.count, DataType::float64, ReduceOp::sum);
    }
  } else {
    want.resize(p.count);
    for (size_t i = 0; i < want.size(); ++i)
      want[i] = pattern(root, p.count, i);
  }
  expect_forced_algorithm(rest, allreduce ? IBCOLL_ALLREDUCE : IBCOLL_BCAST, p.count,
                          allreduce ? DataType::float64 : DataType::uint8);
  FaultPoint on_rest = p;
  on_rest.root = root;
  std::chrono::steady_clock::duration first_success{};
  std::vector<std::byte> buffer(want.size());
  for (int call = 0; call < calls; ++call) {
    if (!allreduce && comm_rank(rest) == root) {
      buffer = want;
    } else {
      std::fill(buffer.begin(), buffer.end(), std::byte{0xEE});
    }
    RANK_CHECK(
        fault_call(a, on_rest, input, buffer, rest) == IBCOLL_SUCCESS,
        "call " + std::to_string(call) + " on the shrunken communicator: " + ibcoll_last_error());
    if (call == 0) first_success = std::chrono::steady_clock::now() - start;
    RANK_CHECK(buffer == want, "call " + std::to_string(call) +
                                   " on the shrunken communicator left a wrong result");
  }
  RANK_CHECK(ibcoll_comm_free(&rest) == IBCOLL_SUCCESS, ibcoll_last_error());
  return first_success;
}

}  // namespace ibcoll::testing
