// One rank of a job across the nodes of ci/rxe-cluster, run with IBCOLL_CHECK_CALLS=0 (the call
// check would connect every rank to its recursive-doubling partners) and
// IBCOLL_CONNECT=on_demand (planned would connect every peer of the plan at start-up): verbs
// connections are made on demand, so they must follow the hierarchical algorithms, and the
// counters (ibcoll_get_counters) must show it.
//
//   cluster_connections LAYOUT   e.g. 2,1 or 2,2,2
//
// After small allreduces and bcasts from rank 0 (hierarchical: node stages over shared memory,
// the leaders over verbs), each node's leader has connected to the other leaders and no other
// rank has connected or sent anything over verbs. After large allreduces (rails), each rank with
// a local index below the smallest node's count has connected to its rail on every other node.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "tests/cluster/layout.h"
#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

ibcoll_counters_t counters(ibcoll_context_t context) {
  ibcoll_counters_t c{};
  RANK_CHECK(ibcoll_get_counters(context, &c) == IBCOLL_SUCCESS, ibcoll_last_error());
  return c;
}

void allreduce_ints(ibcoll_comm_t comm, size_t count) {
  const int n = comm_size(comm);
  std::vector<int32_t> data(count, comm_rank(comm) + 1);
  RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, data.data(), count, IBCOLL_INT32, IBCOLL_SUM,
                              comm) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  for (int32_t v : data)
    RANK_CHECK(v == n * (n + 1) / 2, "allreduce of " + std::to_string(count) + ": wrong sum");
}

int run(const std::vector<int>& layout) {
  const int nodes = static_cast<int>(layout.size());
  int smallest = layout[0];
  std::vector<int> local_of, node_size_of;
  for (int count : layout) {
    smallest = std::min(smallest, count);
    for (int local = 0; local < count; ++local) {
      local_of.push_back(local);
      node_size_of.push_back(count);
    }
  }
  ibcoll_context_t context = nullptr;
  ibcoll_comm_t world = nullptr;
  RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
  const int me = comm_rank(world);
  const int local = local_of[static_cast<size_t>(me)];
  const bool node_shared = node_size_of[static_cast<size_t>(me)] > 1;

  constexpr size_t kSmall = 1000, kLarge = 1 << 20;
  expect_algorithm(world, IBCOLL_ALLREDUCE, kSmall, IBCOLL_INT32, "hierarchical");
  expect_algorithm(world, IBCOLL_BCAST, kSmall, IBCOLL_UINT8, "hierarchical");
  expect_algorithm(world, IBCOLL_ALLREDUCE, kLarge, IBCOLL_INT32, "rails");
  for (int i = 0; i < 10; ++i) {
    allreduce_ints(world, kSmall);
    std::vector<uint8_t> data(kSmall, me == 0 ? 7 : 0);
    RANK_CHECK(ibcoll_bcast(data.data(), kSmall, IBCOLL_UINT8, 0, world) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(data == std::vector<uint8_t>(kSmall, 7), "bcast from 0: wrong data");
  }
  const ibcoll_counters_t small = counters(context);
  std::printf("after small calls: %llu connections, verbs %llu messages, shm %llu messages\n",
              static_cast<unsigned long long>(small.verbs_connections),
              static_cast<unsigned long long>(small.verbs_messages_sent),
              static_cast<unsigned long long>(small.shm_messages_sent));
  const uint64_t leader_partners = local == 0 ? static_cast<uint64_t>(nodes - 1) : 0;
  RANK_CHECK(small.verbs_connections == leader_partners,
             "small calls: " + std::to_string(small.verbs_connections) + " connections, not " +
                 std::to_string(leader_partners));
  RANK_CHECK((small.verbs_messages_sent > 0) == (local == 0),
             "small calls: " + std::to_string(small.verbs_messages_sent) +
                 " messages over verbs from a rank with local index " + std::to_string(local));

  for (int i = 0; i < 2; ++i)
    allreduce_ints(world, kLarge);
  const ibcoll_counters_t large = counters(context);
  const uint64_t rail_partners = local < smallest ? static_cast<uint64_t>(nodes - 1) : 0;
  RANK_CHECK(large.verbs_connections == rail_partners,
             "large calls: " + std::to_string(large.verbs_connections) + " connections, not " +
                 std::to_string(rail_partners));
  // Each rail's member sends its slice round the node by messages (the small calls' node
  // stages are slot turns).
  RANK_CHECK(!node_shared || local >= smallest || large.shm_messages_sent > small.shm_messages_sent,
             "large calls: its slice did not go round the node over shared memory");
  RANK_CHECK((large.verbs_messages_sent > small.verbs_messages_sent) == (local < smallest),
             "large calls: verbs messages from a rank with local index " + std::to_string(local));
  RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
  return 0;
}

}  // namespace
}  // namespace ibcoll::testing

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s LAYOUT (ranks per node, e.g. 2,1)\n", argv[0]);
    return 2;
  }
  return ibcoll::testing::run(ibcoll::testing::parse_layout(argv[1]));
}
