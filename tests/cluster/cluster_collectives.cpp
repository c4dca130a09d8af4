// One rank of a job spread over the nodes of ci/rxe-cluster (started by ci/cluster-run), each
// node its own guest with its own /dev/shm and Soft-RoCE device: shared memory inside a node and
// verbs between nodes in one communicator, across a real node boundary.
//
//   cluster_collectives LAYOUT   e.g. 2,2 (ranks per node, node by node, as cluster-run places
//   them)
//
// Checks that each peer is reached the way its node says (shm on the same node, verbs across;
// UCX to all under IBCOLL_TRANSPORT=ucx),
// then runs the sweep on the world and on split communicators that span nodes and that do not:
// allreduce over types and ops at sizes up to several MiB, in place and not, bcast from every
// root, overlapping non-blocking calls on several communicators; every result against its
// reference and bit for bit the same on every rank. Rank 0 prints "digest HEX" over results of
// inexact float inputs, whose bits depend on the reduction order: runs compare it to prove the
// order fixed run to run. A forced algorithm (IBCOLL_*_ALGO) must run every call it can.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/cluster/layout.h"
#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

// IBCOLL_TRANSPORT=ucx: UCX to every peer, this node's too.
void check_routes(ibcoll_comm_t world, const std::vector<int>& node_of) {
  const int me = comm_rank(world);
  const char* forced = std::getenv("IBCOLL_TRANSPORT");
  const bool ucx = forced && std::string(forced) == "ucx";
  for (int r = 0; r < comm_size(world); ++r) {
    const char* want = r == me                                          ? "self"
                       : ucx                                            ? "ucx"
                       : node_of[static_cast<size_t>(r)] == node_of[me] ? "shm"
                                                                        : "verbs";
    const std::string got = ibcoll_transport(world, r);
    RANK_CHECK(got == want, "rank " + std::to_string(r) + " is reached by " + got + ", not " +
                                want + " (node " + std::to_string(node_of[static_cast<size_t>(r)]) +
                                ")");
  }
}

// Inputs whose sums round, so the bits depend on the reduction order; their digest on rank 0.
uint64_t order_digest(ibcoll_comm_t comm) {
  const int me = comm_rank(comm);
  uint64_t digest = kFnvOffset;
  for (size_t count : {size_t{3}, size_t{1000}, size_t{70001}, size_t{1} << 20}) {
    std::vector<float> mine(count), out(count);
    for (size_t i = 0; i < count; ++i)
      mine[i] = 1.0f / static_cast<float>(3 + (i * 7 + static_cast<size_t>(me) * 13) % 101);
    RANK_CHECK(ibcoll_allreduce(mine.data(), out.data(), count, IBCOLL_FLOAT32, IBCOLL_SUM, comm) ==
                   IBCOLL_SUCCESS,
               ibcoll_last_error());
    expect_same_everywhere(comm, out.data(), count * sizeof(float),
                           "inexact float sum of " + std::to_string(count));
    digest = fnv1a(out.data(), count * sizeof(float), digest);
  }
  return digest;
}

// Several communicators at once, each with calls outstanding: every call must finish with
// the right answer whatever order the ranks wait in.
void overlapping_calls(const std::vector<ibcoll_comm_t>& comms) {
  constexpr size_t kCount = 50000;
  std::vector<std::vector<int32_t>> in(comms.size()), out(comms.size());
  std::vector<std::vector<uint8_t>> data(comms.size());
  std::vector<ibcoll_request_t> requests;
  for (size_t c = 0; c < comms.size(); ++c) {
    const int me = comm_rank(comms[c]);
    in[c].assign(kCount, me + static_cast<int>(c));
    out[c].assign(kCount, -1);
    data[c].assign(kCount, me == 0 ? static_cast<uint8_t>(c + 1) : 0);
    ibcoll_request_t a = nullptr, b = nullptr;
    RANK_CHECK(ibcoll_iallreduce(in[c].data(), out[c].data(), kCount, IBCOLL_INT32, IBCOLL_SUM,
                                 comms[c], &a) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(
        ibcoll_ibcast(data[c].data(), kCount, IBCOLL_UINT8, 0, comms[c], &b) == IBCOLL_SUCCESS,
        ibcoll_last_error());
    requests.push_back(a);
    requests.push_back(b);
  }
  for (size_t i = requests.size(); i-- > 0;) {  // waited for in the reverse order
    RANK_CHECK(ibcoll_wait(requests[i]) == IBCOLL_SUCCESS, ibcoll_last_error());
    ibcoll_request_free(&requests[i]);
  }
  for (size_t c = 0; c < comms.size(); ++c) {
    const int n = comm_size(comms[c]);
    const int32_t want = n * (n - 1) / 2 + n * static_cast<int>(c);
    for (size_t i = 0; i < kCount; ++i) {
      RANK_CHECK(out[c][i] == want, "overlapping allreduce on communicator " + std::to_string(c));
      RANK_CHECK(data[c][i] == c + 1, "overlapping bcast on communicator " + std::to_string(c));
    }
  }
}

// Every type class and op at sizes on both sides of the eager limit; the multi-MiB sizes on
// one type each (bandwidth between the guests is ~10 MB/s). Where an algorithm is forced, two
// types (a 16-bit float's kernels are those of the unforced runs and the unit tests), and none on
// a communicator where neither forced algorithm can run (the table's choice, the unforced runs'
// part): 7 forced runs cost CI a minute less.
void sweep(ibcoll_comm_t comm) {
  const bool forced = forced_algorithm(IBCOLL_ALLREDUCE) || forced_algorithm(IBCOLL_BCAST);
  if (forced && !forced_can_run(comm, IBCOLL_ALLREDUCE, 1, DataType::int32) &&
      !forced_can_run(comm, IBCOLL_BCAST, 1, DataType::uint8)) {
    return;
  }
  if (forced) {
    allreduce_sweep(comm, {DataType::int32, DataType::float64}, {0, 1, 1031, 20000});
  } else {
    allreduce_sweep(comm, {DataType::int32, DataType::bfloat16, DataType::float64},
                    {0, 1, 1031, 20000});
  }
  bcast_every_root(comm, DataType::uint8, {0, 7, 65537});
}

// 12 MiB of int32 (and 3 MiB bcasts) where the table chooses; 4 MiB (and 1 MiB bcasts) where an
// algorithm is forced (its pipeline takes many chunks either way, and 7 forced runs at ~10 MB/s
// cost CI a minute more).
void large_calls(ibcoll_comm_t comm) {
  const int me = comm_rank(comm), n = comm_size(comm);
  const char* forced = std::getenv("IBCOLL_ALLREDUCE_ALGO");
  const size_t count = forced && std::string(forced) != "auto" ? size_t{1} << 20 : size_t{3} << 20;
  const std::vector<std::byte> want = reference(DataType::int32, ReduceOp::sum, n, count);
  std::vector<std::byte> mine = input(DataType::int32, ReduceOp::sum, me, count);
  RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, mine.data(), count, IBCOLL_INT32, IBCOLL_SUM,
                              comm) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  RANK_CHECK(mine == want,
             std::to_string(count * 4) + " bytes of int32 summed in place: wrong result");
  for (int root : {0, n - 1}) {
    std::vector<uint8_t> data(count, 0);
    if (me == root) {
      for (size_t i = 0; i < count; ++i)
        data[i] = static_cast<uint8_t>(pattern(root, count, i));
    }
    RANK_CHECK(ibcoll_bcast(data.data(), count, IBCOLL_UINT8, root, comm) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    for (size_t i = 0; i < count; ++i)
      RANK_CHECK(data[i] == static_cast<uint8_t>(pattern(root, count, i)),
                 std::to_string(count) + "-byte bcast from " + std::to_string(root) +
                     ": wrong byte at " + std::to_string(i));
  }
}

// Rank 0 says how long each part took (the log shows where the time of a slow run went).
class Phases {
 public:
  explicit Phases(int rank) : rank_(rank) {}
  void end(const char* what) {
    const auto now = std::chrono::steady_clock::now();
    if (rank_ == 0) {
      std::printf("%s: %.1f s\n", what, std::chrono::duration<double>(now - start_).count());
      std::fflush(stdout);
    }
    start_ = now;
  }

 private:
  int rank_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

int run(const std::vector<int>& layout) {
  std::vector<int> node_of, local_of;
  for (size_t node = 0; node < layout.size(); ++node) {
    for (int local = 0; local < layout[node]; ++local) {
      node_of.push_back(static_cast<int>(node));
      local_of.push_back(local);
    }
  }
  CapiRank rank;
  RANK_CHECK(rank.size() == static_cast<int>(node_of.size()),
             "the job has " + std::to_string(rank.size()) + " ranks; the layout says " +
                 std::to_string(node_of.size()));
  const int me = rank.rank();
  check_routes(rank.world(), node_of);

  Phases phases(me);
  sweep(rank.world());
  phases.end("world sweep");
  large_calls(rank.world());
  phases.end("world large calls");
  // Within each node (spans none), across nodes by local rank (spans all), and odd / even
  // ranks (spans nodes in a layout with an odd count).
  ibcoll_comm_t by_node = nullptr, by_local = nullptr, by_parity = nullptr;
  RANK_CHECK(ibcoll_comm_split(rank.world(), node_of[me], me, &by_node) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_split(rank.world(), local_of[me], me, &by_local) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  RANK_CHECK(ibcoll_comm_split(rank.world(), me % 2, me, &by_parity) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  for (ibcoll_comm_t comm : {by_node, by_local, by_parity})
    sweep(comm);
  phases.end("split sweeps");
  overlapping_calls({rank.world(), by_node, by_local, by_parity});
  phases.end("overlapping calls");
  const uint64_t digest = order_digest(rank.world());
  phases.end("order digest");
  if (me == 0) std::printf("digest %016llx\n", static_cast<unsigned long long>(digest));
  for (ibcoll_comm_t* comm : {&by_node, &by_local, &by_parity})
    RANK_CHECK(ibcoll_comm_free(comm) == IBCOLL_SUCCESS, ibcoll_last_error());
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
