// One rank of a job across the nodes of ci/rxe-cluster that loses members mid-collective, and
// whose survivors shrink and go on:
//
//   cluster_failures LAYOUT kill-rank [SEED]   the last rank kills itself (SIGKILL) in a call
//   cluster_failures LAYOUT stop-node [SEED]   the last node powers off (its ranks gone at once)
//   cluster_failures LAYOUT kill-two [SEED]    kill-rank, and the first rank of the node before
//                                              the last is killed inside the survivors' shrink
//
// The call and the point are drawn from the seed (the job secret's unless given; printed): an
// algorithm that spans nodes, forced, and a fault point of it (tests/support/fault_point.h), whose
// victim is the last rank, or the last node's first, which powers the node off. Every survivor
// checks each result until a call fails; that call must come no earlier than the one before the
// fatal one, fail within seconds (kDetectSeconds, far below IBCOLL_TIMEOUT) as a lost peer
// naming a lost rank. The survivors then shrink the communicator (until one of them serves a
// call: with kill-two, the second victim dies after its Nth agreement message, N drawn, or once
// its shrink returned), and go on with a sweep of allreduces and bcasts among themselves, each
// result checked against a reference and across the ranks; the survivor says how long after its
// failed call the first call among the rest succeeded, frees its communicators, finalizes and
// exits 0. Run with cluster-run --may-fail naming the victims.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "tests/cluster/layout.h"
#include "tests/support/collectives.h"
#include "tests/support/fault_point.h"
#include "tests/support/shrinking.h"

namespace ibcoll::testing {
namespace {

using collectives::Algorithm;
using collectives::Collective;

constexpr double kDetectSeconds = 30;  // a silent node is seen in ~10 s on a 2 s keepalive
constexpr size_t kLargest = 1 << 20;   // bytes per rank: the emulated network is slow

// The node's off mark first: ci/cluster-netwatch then knows its silence is no network fault.
void stop_this_node() {
  const char* cluster = std::getenv("RXE_CLUSTER_DIR");
  const char* node = std::getenv("RXE_CLUSTER_NODE");
  RANK_CHECK(cluster && node, "stop-node runs inside ci/rxe-cluster");
  const std::string mark = std::string(cluster) + "/node" + node + "/off";
  const int marked = open(mark.c_str(), O_WRONLY | O_CREAT, 0644);
  RANK_CHECK(marked >= 0, "cannot write " + mark);
  close(marked);
  const int fd = open("/proc/sysrq-trigger", O_WRONLY);
  RANK_CHECK(fd >= 0 && write(fd, "o", 1) == 1, "cannot power the node off");
  pause();  // the node is going down
}

// The sweep among the survivors: allreduces of every size band (against the fold of the
// survivors' inputs in order) and bcasts from the first and the last of them, each result
// checked; and a sum that rounds, the same bits on every survivor.
void go_on_among(const Shrunk& rest, int me) {
  for (size_t count : {size_t{1}, size_t{1000}, size_t{65537}}) {
    std::vector<std::byte> want = input(DataType::float64, ReduceOp::sum, rest.members[0], count);
    for (size_t k = 1; k < rest.members.size(); ++k) {
      collectives::reduce(want.data(),
                          input(DataType::float64, ReduceOp::sum, rest.members[k], count).data(),
                          count, DataType::float64, ReduceOp::sum);
    }
    std::vector<std::byte> got = input(DataType::float64, ReduceOp::sum, me, count);
    RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, got.data(), count, IBCOLL_FLOAT64, IBCOLL_SUM,
                                rest.comm) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(got == want, "an allreduce of " + std::to_string(count) + " among the survivors");
  }
  const int n = comm_size(rest.comm);
  for (int root : {0, n - 1}) {
    for (size_t count : {size_t{100}, size_t{8000}, size_t{65537}}) {
      std::vector<std::byte> data(count, std::byte{0xEE});
      if (comm_rank(rest.comm) == root) {
        for (size_t i = 0; i < count; ++i)
          data[i] = pattern(root, count, i);
      }
      RANK_CHECK(ibcoll_bcast(data.data(), count, IBCOLL_UINT8, root, rest.comm) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
      for (size_t i = 0; i < count; ++i)
        RANK_CHECK(data[i] == pattern(root, count, i), "a bcast among the survivors");
    }
  }
  std::vector<float> rounding = rounding_input(me, 65536);
  RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, rounding.data(), rounding.size(), IBCOLL_FLOAT32,
                              IBCOLL_SUM, rest.comm) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  expect_same_everywhere(rest.comm, rounding.data(), rounding.size() * sizeof(float),
                         "a sum that rounds, among the survivors");
}

int run(const std::vector<int>& layout, const std::string& scenario, uint64_t seed) {
  int size = 0;
  for (int count : layout)
    size += count;
  const int last_node_first = size - layout.back();
  RANK_CHECK(scenario == "kill-rank" || scenario == "stop-node" || scenario == "kill-two",
             "scenario must be kill-rank, stop-node or kill-two");
  RANK_CHECK(scenario != "kill-two" || layout.size() >= 2, "kill-two needs two nodes");
  std::vector<int> victims;
  if (scenario == "stop-node") {
    for (int r = last_node_first; r < size; ++r)
      victims.push_back(r);
  } else {
    victims = {size - 1};
  }
  // kill-two's second victim, and after which of its agreement messages it dies.
  const int in_shrink = scenario == "kill-two" ? last_node_first - layout[layout.size() - 2] : -1;
  const int in_shrink_after = 1 + static_cast<int>(seed % 3);
  const auto spanning = spanning_algorithms();
  const Algorithm& a = *spanning[seed % spanning.size()];
  FaultPoint p = draw_fault_point(seed, a, size, kLargest);
  p.victim = victims.front();
  std::printf("%s %s: %s%s (replay: cluster_failures LAYOUT %s %llu)\n",
              collectives::collective_name(a.collective), a.name, p.describe().c_str(),
              in_shrink < 0 ? ""
                            : (", then rank " + std::to_string(in_shrink) +
                               " dies after its agreement message " +
                               std::to_string(in_shrink_after) + " in the shrink")
                                  .c_str(),
              scenario.c_str(), static_cast<unsigned long long>(seed));
  const bool allreduce = a.collective == Collective::allreduce;
  for (const auto& [name, value] : fault_case_environment(a, p))
    setenv(name.c_str(), value.c_str(), 1);
  const std::string job_rank = std::getenv("IBCOLL_RANK") ? std::getenv("IBCOLL_RANK") : "";
  if (job_rank == std::to_string(in_shrink)) {
    setenv("IBCOLL_FAULT", ("agreement-exit:" + std::to_string(in_shrink_after)).c_str(), 1);
  }

  ibcoll_context_t context = nullptr;
  ibcoll_comm_t world = nullptr;
  RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
  ibcoll_comm_t comm = nullptr;  // a communicator of its own, which the survivors free
  RANK_CHECK(ibcoll_comm_split(world, 0, 0, &comm) == IBCOLL_SUCCESS, ibcoll_last_error());
  const int me = comm_rank(comm);
  const bool victim = std::find(victims.begin(), victims.end(), me) != victims.end();
  FaultCase c = enter_fault_case(a, p, comm, me, size);
  if (me == p.victim) {
    die_at_the_point(a, p, comm, c.input, c.buffer, [&] {
      if (scenario == "stop-node") stop_this_node();
    });
  }
  for (int call = 0;; ++call) {
    if (allreduce || me != p.root) std::fill(c.buffer.begin(), c.buffer.end(), std::byte{0xEE});
    const auto start = std::chrono::steady_clock::now();
    const ibcoll_status_t status = fault_call(a, p, c.input, c.buffer, comm);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status == IBCOLL_SUCCESS) {
      RANK_CHECK(victim || c.buffer == c.want,
                 "call " + std::to_string(call) + " succeeded with a wrong result");
      RANK_CHECK(call < p.calls_before + 1000, "the lost ranks were never noticed");
      continue;
    }
    const std::string error = ibcoll_last_error();
    std::printf("call %d failed after %.1f s: %s\n", call, seconds, error.c_str());
    RANK_CHECK(!victim || scenario == "stop-node", "a victim's call failed: " + error);
    if (victim) pause();  // its node is going down
    // The victim returned from its call before the fatal one, so every rank had ended the one
    // before that; the call just before the fatal one may still need a victim's messages (a
    // bcast's root returns early; a node powers off whatever its other ranks still had to send).
    RANK_CHECK(call >= p.calls_before - 1, "a call failed before anyone was lost: " + error);
    RANK_CHECK(status == IBCOLL_ERR_PEER_FAILED, std::string("the loss ended the call with ") +
                                                     ibcoll_status_name(status) +
                                                     ", not as a lost peer: " + error);
    RANK_CHECK(seconds < kDetectSeconds,
               "the loss took " + std::to_string(seconds) + " s to fail the call: " + error);
    bool names_victim = false;
    for (int v : victims)
      names_victim |= error.find("rank " + std::to_string(v)) != std::string::npos ||
                      error.find("peer " + std::to_string(v)) != std::string::npos;
    RANK_CHECK(names_victim, "the error names no lost rank: " + error);
    break;
  }
  const auto failed_at = std::chrono::steady_clock::now();
  std::vector<int> members(static_cast<size_t>(size));
  std::iota(members.begin(), members.end(), 0);
  Shrunk rest = shrink_until_it_serves(comm, members, [&] {
    if (me == in_shrink) raise(SIGKILL);  // it sent fewer messages: it dies all the same
  });
  const double went_on =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - failed_at).count();
  std::vector<int> lost = victims;
  if (in_shrink >= 0) lost.push_back(in_shrink);
  std::sort(lost.begin(), lost.end());
  std::vector<int> held_failed = rest.held_failed;
  std::sort(held_failed.begin(), held_failed.end());
  RANK_CHECK(held_failed == lost, "the agreements held other ranks failed than those lost");
  std::printf(
      "shrunk %d time(s): %zu ranks go on; the first call among them %.2f s after the "
      "failed one\n",
      rest.shrinks, rest.members.size(), went_on);
  go_on_among(rest, me);
  RANK_CHECK(ibcoll_comm_free(&rest.comm) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_free(&comm) == IBCOLL_SUCCESS, ibcoll_last_error());
  const auto start = std::chrono::steady_clock::now();
  const ibcoll_status_t finalized = ibcoll_finalize(context);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("finalize: %s after %.1f s\n", ibcoll_status_name(finalized), seconds);
  RANK_CHECK(seconds < kDetectSeconds, "finalize took " + std::to_string(seconds) + " s");
  return 0;
}

}  // namespace
}  // namespace ibcoll::testing

int main(int argc, char** argv) {
  if (argc < 3 || argc > 4) {
    std::fprintf(stderr, "usage: %s LAYOUT kill-rank|stop-node|kill-two [SEED]\n", argv[0]);
    return 2;
  }
  const uint64_t seed = ibcoll::testing::seed_of_the_job(argc > 3 ? argv[3] : nullptr);
  return ibcoll::testing::run(ibcoll::testing::parse_layout(argv[1]), argv[2], seed);
}
