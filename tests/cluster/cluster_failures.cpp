// One rank of a job across the nodes of ci/rxe-cluster that loses members mid-collective:
//
//   cluster_failures LAYOUT kill-rank    the last rank kills itself (SIGKILL) inside a call
//   cluster_failures LAYOUT stop-node    the last node powers off (every rank on it gone at once)
//
// Every rank calls 1 MiB allreduces on the world in a loop; the victims go after a few. Each
// survivor's pending call must fail within seconds (kDetectSeconds, far below IBCOLL_TIMEOUT)
// with an error naming a lost rank; the survivor then frees its communicator, finalizes and
// exits 0. Run with cluster-run --may-fail naming the victims.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tests/cluster/layout.h"
#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

constexpr int kCallsBeforeLoss = 5;
constexpr double kDetectSeconds = 30;  // a silent node is seen in ~10 s on a 2 s keepalive

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

int run(const std::vector<int>& layout, const std::string& scenario) {
  int size = 0;
  for (int count : layout)
    size += count;
  const int last_node_first = size - layout.back();
  RANK_CHECK(scenario == "kill-rank" || scenario == "stop-node",
             "scenario must be kill-rank or stop-node");
  std::vector<int> victims;
  if (scenario == "kill-rank") {
    victims = {size - 1};
  } else {
    for (int r = last_node_first; r < size; ++r)
      victims.push_back(r);
  }

  ibcoll_context_t context = nullptr;
  ibcoll_comm_t world = nullptr;
  RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
  ibcoll_comm_t comm = nullptr;  // a communicator of its own, which the survivors free
  RANK_CHECK(ibcoll_comm_split(world, 0, 0, &comm) == IBCOLL_SUCCESS, ibcoll_last_error());
  const int me = comm_rank(comm);
  const bool victim = std::find(victims.begin(), victims.end(), me) != victims.end();

  constexpr size_t kCount = 256 << 10;  // 1 MiB of int32: a call long enough to be inside
  std::vector<int32_t> in(kCount, me), out(kCount);
  for (int call = 0;; ++call) {
    if (victim && call == kCallsBeforeLoss) {
      if (scenario == "kill-rank") raise(SIGKILL);
      if (me == last_node_first) stop_this_node();
    }
    const auto start = std::chrono::steady_clock::now();
    const ibcoll_status_t status =
        ibcoll_allreduce(in.data(), out.data(), kCount, IBCOLL_INT32, IBCOLL_SUM, comm);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (status == IBCOLL_SUCCESS) {
      RANK_CHECK(call < kCallsBeforeLoss + 1000, "the lost ranks were never noticed");
      continue;
    }
    const std::string error = ibcoll_last_error();
    std::printf("call %d failed after %.1f s: %s\n", call, seconds, error.c_str());
    RANK_CHECK(!victim || scenario == "stop-node", "a victim's call failed: " + error);
    if (victim) pause();  // its node is going down
    // A victim that returned from call k-1 knows every rank entered it, so every rank finished
    // call k-2; call k-1 itself may still need a victim's part (a node powers off when its
    // first rank is done, whatever its other ranks still had to send).
    RANK_CHECK(call >= kCallsBeforeLoss - 1, "a call failed before anyone was lost: " + error);
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
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s LAYOUT kill-rank|stop-node\n", argv[0]);
    return 2;
  }
  return ibcoll::testing::run(ibcoll::testing::parse_layout(argv[1]), argv[2]);
}
