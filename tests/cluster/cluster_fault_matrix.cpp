// The fault matrix across the guests of ci/rxe-cluster: for every algorithm that runs on a
// communicator spanning nodes, a rank killed (SIGKILL) at a seeded point of its collective
// (tests/support/fault_point.h), over the transport the environment gives (verbs by default).
//
//   cluster_fault_matrix LAYOUT [SEED]
//
// Each rank cluster-run starts runs the cases one after another, each as a job of its own in a
// child it forks (a store on a port of the case's own, a secret of the case's own), so one
// cluster job holds them all and no rank of it dies. The victim's child dies; every survivor's
// child must fail a call naming the dead rank, no earlier than the call before the fatal one,
// within kDetectSeconds of that call's start; its next call fails at once; nothing lands in its
// buffer after; the survivors shrink and the case goes on among them, right; it finalizes. The seed
// (printed) is the job secret's unless given: every case prints how to replay it.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "tests/cluster/layout.h"
#include "tests/support/collectives.h"
#include "tests/support/fault_point.h"

namespace ibcoll::testing {
namespace {

using collectives::Algorithm;

constexpr double kDetectSeconds = 30;  // a silent peer is seen in ~10 s on a 2 s keepalive
// Bytes per rank at most: the emulated network moves ~10 MB/s, and each case makes up to 24
// calls after the death.
constexpr size_t kLargest = 1 << 20;

std::string must_get(const char* name) {
  const char* value = std::getenv(name);
  RANK_CHECK(value && *value, std::string(name) + " is not set: run me under ci/cluster-run");
  return value;
}

// The case's own store port and secret, from the job's.
void become_case(int index, const Algorithm& a, const FaultPoint& p) {
  const std::string bootstrap = must_get("IBCOLL_BOOTSTRAP");
  const size_t colon = bootstrap.rfind(':');
  const int port = std::stoi(bootstrap.substr(colon + 1)) + 1 + index;
  setenv("IBCOLL_BOOTSTRAP", (bootstrap.substr(0, colon + 1) + std::to_string(port)).c_str(), 1);
  std::string secret = must_get("IBCOLL_JOB_SECRET");
  char tail[9];
  std::snprintf(tail, sizeof(tail), "%08x", static_cast<unsigned>(index));
  secret.replace(secret.size() - 8, 8, tail);
  setenv("IBCOLL_JOB_SECRET", secret.c_str(), 1);
  for (const auto& [name, value] : fault_case_environment(a, p))
    setenv(name.c_str(), value.c_str(), 1);
}

// One rank of one case, in the child.
int run_case(int index, const Algorithm& a, const FaultPoint& p, int me, int size) {
  become_case(index, a, p);
  ibcoll_context_t context = nullptr;
  ibcoll_comm_t world = nullptr;
  RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
  FaultCase c = enter_fault_case(a, p, world, me, size);
  if (me == p.victim) die_at_the_point(a, p, world, c.input, c.buffer, [] {});
  const Survival s = survive(a, p, context, world, me, c.input, c.buffer, c.want);
  // The victim returned from its call before the fatal one, so every rank had ended the one
  // before that; the call just before the fatal one may still need the victim's messages.
  RANK_CHECK(s.failed_call >= p.calls_before - 1,
             "call " + std::to_string(s.failed_call) + " failed before the death: " + s.error);
  RANK_CHECK(s.failed_call_seconds < kDetectSeconds, "the death took " +
                                                         std::to_string(s.failed_call_seconds) +
                                                         " s to fail the call: " + s.error);
  std::vector<int> everyone(static_cast<size_t>(size));
  std::iota(everyone.begin(), everyone.end(), 0);
  const auto went_on = shrink_and_go_on(a, p, world, everyone, me);
  std::printf(
      "case %d: call %d failed after %.1f s: %s; shrink and a first call among the rest "
      "%.2f s\n",
      index, s.failed_call, s.failed_call_seconds, s.error.c_str(),
      std::chrono::duration<double>(went_on).count());
  RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
  std::fflush(stdout);  // the child leaves by _exit
  return 0;
}

int run(const std::vector<int>& layout, uint64_t seed) {
  int size = 0;
  for (int count : layout)
    size += count;
  const int me = std::stoi(must_get("IBCOLL_RANK"));
  RANK_CHECK(layout.size() >= 2, "the layout must span nodes");
  std::fflush(stdout);
  int index = 0, failed = 0;
  for (const Algorithm* spanning : spanning_algorithms()) {
    const Algorithm& a = *spanning;
    const std::string name = std::string(collectives::collective_name(a.collective)) + " " + a.name;
    const FaultPoint p =
        draw_fault_point(seed * 1000 + static_cast<uint64_t>(index), a, size, kLargest);
    const pid_t child = fork();
    RANK_CHECK(child >= 0, "fork");
    if (child == 0) _exit(run_case(index, a, p, me, size));
    int status = 0;
    RANK_CHECK(waitpid(child, &status, 0) == child, "waitpid");
    const bool victim = me == p.victim;
    const bool as_planned = victim ? WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL
                                   : WIFEXITED(status) && WEXITSTATUS(status) == 0;
    failed += as_planned ? 0 : 1;
    std::printf("case %d, %s: %s: %s (replay: cluster_fault_matrix LAYOUT %llu)\n", index,
                name.c_str(), p.describe().c_str(),
                as_planned ? (victim ? "killed" : "survived") : "FAILED",
                static_cast<unsigned long long>(seed));
    std::fflush(stdout);
    ++index;
  }
  std::printf("%d faults, %d failed\n", index, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ibcoll::testing

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s LAYOUT [SEED]\n", argv[0]);
    return 2;
  }
  const uint64_t seed = ibcoll::testing::seed_of_the_job(argc > 2 ? argv[2] : nullptr);
  std::printf("fault seed %llu\n", static_cast<unsigned long long>(seed));
  return ibcoll::testing::run(ibcoll::testing::parse_layout(argv[1]), seed);
}
