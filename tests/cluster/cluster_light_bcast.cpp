// One rank of a job across the nodes of ci/rxe-cluster, run with IBCOLL_FULL_CHECK_EVERY=1024
// (every small bcast here is light) and IBCOLL_PROBE_AFTER=10s (no probe while the calls agree,
// however slow the emulated network): light bcasts (collectives/bcast/light.h) over verbs.
//
//   cluster_light_bcast LAYOUT   (nodes of equal size: 2,2 or 2,2,2)
//
// Small bcasts from rank 0, every byte checked: over verbs, the ranks together send one message
// per call into each other node (the tree crosses the highest bits first), counted
// (ibcoll_get_counters). Then ranks take the rank half the job away for the root, each pair across
// nodes taking each other: every rank fails with the mismatch, naming the root, within the
// probes' seconds (IBCOLL_TIMEOUT is minutes).
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/cluster/layout.h"
#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

uint64_t verbs_messages(ibcoll_context_t context) {
  ibcoll_counters_t c{};
  RANK_CHECK(ibcoll_get_counters(context, &c) == IBCOLL_SUCCESS, ibcoll_last_error());
  return c.verbs_messages_sent;
}

int run(const std::vector<int>& layout) {
  const auto nodes = static_cast<int64_t>(layout.size());
  ibcoll_context_t context = nullptr;
  ibcoll_comm_t world = nullptr;
  RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
  const int me = comm_rank(world), n = comm_size(world);
  constexpr size_t kBytes = 1000;
  expect_algorithm(world, IBCOLL_BCAST, kBytes, IBCOLL_UINT8, "binomial");

  constexpr int kCalls = 20;
  int64_t sent = -static_cast<int64_t>(verbs_messages(context));
  for (int call = 0; call < kCalls; ++call) {
    std::vector<uint8_t> data(kBytes, me == 0 ? static_cast<uint8_t>(call + 1) : 0);
    RANK_CHECK(ibcoll_bcast(data.data(), kBytes, IBCOLL_UINT8, 0, world) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(data == std::vector<uint8_t>(kBytes, static_cast<uint8_t>(call + 1)),
               "bcast " + std::to_string(call) + ": wrong data");
  }
  sent += static_cast<int64_t>(verbs_messages(context));
  RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &sent, 1, IBCOLL_INT64, IBCOLL_SUM, world) ==
                 IBCOLL_SUCCESS,
             ibcoll_last_error());
  std::printf("%d light bcasts: %lld messages over verbs in all\n", kCalls,
              static_cast<long long>(sent));
  RANK_CHECK(sent == kCalls * (nodes - 1), std::to_string(sent) + " messages over verbs for " +
                                               std::to_string(kCalls) + " bcasts on " +
                                               std::to_string(nodes) + " nodes");

  const auto start = std::chrono::steady_clock::now();
  std::vector<int32_t> data(8, me);
  const ibcoll_status_t s = ibcoll_bcast(data.data(), 8, IBCOLL_INT32, (me + n / 2) % n, world);
  const std::string why = ibcoll_last_error();
  RANK_CHECK(s == IBCOLL_ERR_MISMATCH && why.find("root") != std::string::npos,
             std::string("each other's root: ") + ibcoll_status_name(s) + ": " + why);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("each other's root: failed in %.1f s: %s\n", seconds, why.c_str());
  RANK_CHECK(seconds < 60, "the probes took " + std::to_string(seconds) + " s");
  RANK_CHECK(data == std::vector<int32_t>(8, me), "a failed bcast wrote to the buffer");
  RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
  return 0;
}

}  // namespace
}  // namespace ibcoll::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LAYOUT (ranks per node, e.g. 2,2)\n", argv[0]);
    return 2;
  }
  return ibcoll::testing::run(ibcoll::testing::parse_layout(argv[1]));
}
