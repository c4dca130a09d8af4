// Collective tests through the public C API, over whatever transport the environment picks
// (shared memory on the host, verbs in the VM): inputs whose reductions are exact in every
// type (so a reference folded in rank order must match any algorithm bit for bit), sweeps of
// allreduce over every (type, op) and of bcast from every root, and a check that a buffer holds
// the same bits on every rank.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "collectives/half.h"
#include "collectives/reduce_kernels.h"
#include "collectives/registry.h"
#include "ibcoll/ibcoll.h"
#include "tests/support/forked_ranks.h"

namespace ibcoll::testing {

using collectives::DataType;
using collectives::ReduceOp;

inline const DataType kTypes[] = {DataType::int8,     DataType::int16,   DataType::int32,
                                  DataType::int64,    DataType::uint8,   DataType::uint16,
                                  DataType::uint32,   DataType::uint64,  DataType::float16,
                                  DataType::bfloat16, DataType::float32, DataType::float64};
inline const ReduceOp kOps[] = {ReduceOp::sum,  ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                ReduceOp::band, ReduceOp::bor,  ReduceOp::bxor};

inline ibcoll_datatype_t c_type(DataType type) {
  return static_cast<ibcoll_datatype_t>(type);
}
inline ibcoll_op_t c_op(ReduceOp op) {
  return static_cast<ibcoll_op_t>(op);
}

// Small integers, exact in every type: sums stay within ±3·ranks, and products multiply only
// ±1 and ±2, so every partial result is exact even in bfloat16 and any order gives the same bits.
inline std::vector<std::byte> input(DataType type, ReduceOp op, int rank, size_t count) {
  static const int kFactors[] = {-2, -1, 1, 2, 1, -1, 2};
  std::vector<std::byte> out(count * collectives::type_size(type));
  for (size_t i = 0; i < count; ++i) {
    const size_t k = (static_cast<size_t>(rank) * 7 + i * 3) % 7;
    const int v = op == ReduceOp::prod ? kFactors[k] : static_cast<int>(k) - 3;
    auto put = [&](auto value) { std::memcpy(&out[i * sizeof(value)], &value, sizeof(value)); };
    switch (type) {
      case DataType::int8:
        put(static_cast<int8_t>(v));
        break;
      case DataType::int16:
        put(static_cast<int16_t>(v));
        break;
      case DataType::int32:
        put(static_cast<int32_t>(v));
        break;
      case DataType::int64:
        put(static_cast<int64_t>(v));
        break;
      case DataType::uint8:
        put(static_cast<uint8_t>(v + 4));
        break;
      case DataType::uint16:
        put(static_cast<uint16_t>(v + 4));
        break;
      case DataType::uint32:
        put(static_cast<uint32_t>(v + 4));
        break;
      case DataType::uint64:
        put(static_cast<uint64_t>(v + 4));
        break;
      case DataType::float16:
        put(collectives::float_to_half(static_cast<float>(v)));
        break;
      case DataType::bfloat16:
        put(collectives::float_to_bfloat16(static_cast<float>(v)));
        break;
      case DataType::float32:
        put(static_cast<float>(v));
        break;
      case DataType::float64:
        put(static_cast<double>(v));
        break;
    }
  }
  return out;
}

// Floats whose sums round (a different order of folding gives different bits), different on
// every rank: for tests of the order an algorithm folds in.
inline std::vector<float> rounding_input(int rank, size_t count) {
  std::mt19937 generator(static_cast<uint32_t>(rank) * 7919u + 1u);
  std::uniform_real_distribution<float> value(-1e3f, 1e3f);
  std::vector<float> out(count);
  for (float& v : out)
    v = value(generator) * std::pow(2.0f, static_cast<float>(generator() % 20) - 10.0f);
  return out;
}

// Every rank's input folded in rank order.
inline std::vector<std::byte> reference(DataType type, ReduceOp op, int ranks, size_t count) {
  std::vector<std::byte> want = input(type, op, 0, count);
  for (int r = 1; r < ranks; ++r)
    collectives::reduce(want.data(), input(type, op, r, count).data(), count, type, op);
  return want;
}

// A context joined at construction and finalized at destruction; fails the rank on errors.
class CapiRank {
 public:
  CapiRank() {
    RANK_CHECK(ibcoll_init(&context_) == IBCOLL_SUCCESS, ibcoll_last_error());
    RANK_CHECK(ibcoll_comm_world(context_, &world_) == IBCOLL_SUCCESS, ibcoll_last_error());
    ibcoll_comm_rank(world_, &rank_);
    ibcoll_comm_size(world_, &size_);
  }
  ~CapiRank() { RANK_CHECK(ibcoll_finalize(context_) == IBCOLL_SUCCESS, ibcoll_last_error()); }
  CapiRank(const CapiRank&) = delete;
  CapiRank& operator=(const CapiRank&) = delete;

  ibcoll_context_t context() const { return context_; }
  ibcoll_comm_t world() const { return world_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  ibcoll_context_t context_ = nullptr;
  ibcoll_comm_t world_ = nullptr;
  int rank_ = -1, size_ = 0;
};

inline int comm_rank(ibcoll_comm_t comm) {
  int rank = -1;
  ibcoll_comm_rank(comm, &rank);
  return rank;
}
inline int comm_size(ibcoll_comm_t comm) {
  int size = 0;
  ibcoll_comm_size(comm, &size);
  return size;
}

// FNV-1a over `bytes` at `data`, going on from `h` (so several buffers can make one digest).
inline constexpr uint64_t kFnvOffset = 1469598103934665603ull;
inline uint64_t fnv1a(const void* data, size_t bytes, uint64_t h = kFnvOffset) {
  for (size_t i = 0; i < bytes; ++i) {
    h ^= static_cast<const unsigned char*>(data)[i];
    h *= 1099511628211ull;
  }
  return h;
}

// Fails the rank unless `bytes` at `data` are the same on every rank of `comm` (compared by
// an FNV digest reduced to its minimum and maximum).
inline void expect_same_everywhere(ibcoll_comm_t comm, const void* data, size_t bytes,
                                   const std::string& what) {
  const uint64_t h = fnv1a(data, bytes);
  uint64_t mine[2] = {h, ~h}, least[2] = {};
  RANK_CHECK(ibcoll_allreduce(mine, least, 2, IBCOLL_UINT64, IBCOLL_MIN, comm) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  RANK_CHECK(least[0] == h && least[1] == ~h, what + ": ranks hold different bits");
}

// Fails the rank unless a call of `count` `type` on `comm` runs the algorithm `name` (a test
// about one algorithm's behaviour makes sure it is that one).
inline void expect_algorithm(ibcoll_comm_t comm, ibcoll_collective_t collective, size_t count,
                             ibcoll_datatype_t type, const std::string& name) {
  const char* chosen = ibcoll_algorithm(comm, collective, count, type);
  RANK_CHECK(chosen && name == chosen,
             "the call runs " + std::string(chosen ? chosen : "?") + ", not " + name);
}

// In a rank: its init fails with `status` and no context, the error holding each of `words`.
inline int init_fails(ibcoll_status_t status, std::initializer_list<const char*> words) {
  ibcoll_context_t context = nullptr;
  const ibcoll_status_t s = ibcoll_init(&context);
  RANK_CHECK(s == status && !context,
             std::string("init: ") + ibcoll_status_name(s) + ": " + ibcoll_last_error());
  for (const char* word : words)
    RANK_CHECK(std::strstr(ibcoll_last_error(), word), ibcoll_last_error());
  return 0;
}

// Fails the rank unless `status` is IBCOLL_ERR_PEER_FAILED naming rank `dead` of the job, as
// the transport that saw it die does ("peer 2 (pid ...) has exited", "peer 2 stopped
// acknowledging", "UCX connection to peer 2: ...", "job rank 2 (pid ...) has exited" in the
// slots, also as the cause a member that gave up passed on) or as one that heard of it ("rank 2
// is gone").
inline void expect_dead_rank_named(ibcoll_status_t status, int dead, const std::string& what) {
  const std::string m = ibcoll_last_error(), r = std::to_string(dead);
  RANK_CHECK(status == IBCOLL_ERR_PEER_FAILED, what + ": " + ibcoll_status_name(status) + ": " + m);
  bool named = false;
  for (const std::string& form :
       {"rank " + r + " is gone", "rank " + r + " (pid", "peer " + r + " ", "peer " + r + ":"})
    named = named || m.find(form) != std::string::npos;
  RANK_CHECK(named, what + ": the message does not name dead rank " + r + ": " + m);
}

// True when every member of `comm` is reached through this node's shared memory, so that the
// communicator can have a slot region (unless IBCOLL_SHM_SLOTS=0).
inline bool members_share_memory(ibcoll_comm_t comm) {
  for (int r = 0; r < comm_size(comm); ++r) {
    const std::string transport = ibcoll_transport(comm, r);
    if (transport != "shm" && transport != "self") return false;
  }
  return true;
}

// True when some member of `comm` runs on another node: one reached over verbs, unless
// IBCOLL_TRANSPORT=verbs sends to this node's ranks over verbs too.
inline bool members_span_nodes(ibcoll_comm_t comm) {
  const char* transport_setting = std::getenv("IBCOLL_TRANSPORT");
  if (transport_setting && std::string(transport_setting) == "verbs") return false;
  for (int r = 0; r < comm_size(comm); ++r)
    if (std::string(ibcoll_transport(comm, r)) == "verbs") return true;
  return false;
}

// The algorithm IBCOLL_*_ALGO forces for `collective`, or null where none is forced.
inline const char* forced_algorithm(ibcoll_collective_t collective) {
  const char* forced =
      std::getenv(collective == IBCOLL_ALLREDUCE ? "IBCOLL_ALLREDUCE_ALGO" : "IBCOLL_BCAST_ALGO");
  return forced && *forced && std::string(forced) != "auto" ? forced : nullptr;
}

// Whether the forced algorithm of `collective` can run a call of `count` `type` on `comm` (not
// too large for it; slots with a slot region; a hierarchical one across nodes).
inline bool forced_can_run(ibcoll_comm_t comm, ibcoll_collective_t collective, size_t count,
                           DataType type) {
  const char* forced = forced_algorithm(collective);
  if (!forced) return false;
  const collectives::Algorithm& a = collectives::find_algorithm(
      collective == IBCOLL_ALLREDUCE ? collectives::Collective::allreduce
                                     : collectives::Collective::bcast,
      forced);
  const char* slots_setting = std::getenv("IBCOLL_SHM_SLOTS");
  const bool slots = comm_size(comm) > 1 && members_share_memory(comm) &&
                     !(slots_setting && std::string(slots_setting) == "0");
  return (!a.uses_slots || slots) && (!a.across_nodes || members_span_nodes(comm)) &&
         count * collectives::type_size(type) <= a.max_bytes;
}

// A forced algorithm that cannot run on a call (too large for it; slots without a slot region;
// a hierarchical one on one node) gives way to the table's choice without a word. So a sweep that
// forces one (IBCOLL_*_ALGO) fails the rank unless that algorithm really runs every call it can.
inline void expect_forced_algorithm(ibcoll_comm_t comm, ibcoll_collective_t collective,
                                    size_t count, DataType type) {
  const char* forced = forced_algorithm(collective);
  if (!forced) return;
  const bool can_run = forced_can_run(comm, collective, count, type);
  const std::string chosen = ibcoll_algorithm(comm, collective, count, c_type(type));
  RANK_CHECK(!can_run || chosen == forced,
             std::string(forced) + " is forced and can run " + std::to_string(count) + " " +
                 collectives::type_name(type) + ", but " + chosen + " does");
}

// Allreduce of every valid (type, op) in `types` × every op, at each count, in place and not,
// against the reference.
inline void allreduce_sweep(ibcoll_comm_t comm, const std::vector<DataType>& types,
                            const std::vector<size_t>& counts) {
  const int me = comm_rank(comm), n = comm_size(comm);
  for (DataType type : types) {
    for (ReduceOp op : kOps) {
      if (!collectives::check_reduction(type, op).ok()) continue;
      for (size_t count : counts) {
        expect_forced_algorithm(comm, IBCOLL_ALLREDUCE, count, type);
        const std::vector<std::byte> want = reference(type, op, n, count);
        for (bool in_place : {false, true}) {
          std::vector<std::byte> mine = input(type, op, me, count), out(mine.size());
          void* result = in_place ? mine.data() : out.data();
          const void* send = in_place ? IBCOLL_IN_PLACE : mine.data();
          const std::string what =
              std::string(collectives::type_name(type)) + " " + collectives::op_name(op) +
              " count " + std::to_string(count) + (in_place ? " in place" : "") + " on " +
              std::to_string(n) + " ranks (" +
              ibcoll_algorithm(comm, IBCOLL_ALLREDUCE, count, c_type(type)) + ")";
          RANK_CHECK(
              ibcoll_allreduce(send, result, count, c_type(type), c_op(op), comm) == IBCOLL_SUCCESS,
              what + ": " + ibcoll_last_error());
          RANK_CHECK(want.empty() || std::memcmp(result, want.data(), want.size()) == 0,
                     what + ": wrong result");
        }
      }
    }
  }
}

inline std::byte pattern(int root, size_t count, size_t i) {
  return static_cast<std::byte>((static_cast<size_t>(root) * 131 + count * 7 + i * 13) % 251);
}

// Bcast of `count` elements of `type` from every root in turn; every byte checked everywhere.
inline void bcast_every_root(ibcoll_comm_t comm, DataType type, const std::vector<size_t>& counts) {
  const int me = comm_rank(comm), n = comm_size(comm);
  for (int root = 0; root < n; ++root) {
    for (size_t count : counts) {
      expect_forced_algorithm(comm, IBCOLL_BCAST, count, type);
      std::vector<std::byte> data(count * collectives::type_size(type), std::byte{0xEE});
      if (me == root) {
        for (size_t i = 0; i < data.size(); ++i)
          data[i] = pattern(root, count, i);
      }
      const std::string what = "bcast from " + std::to_string(root) + " count " +
                               std::to_string(count) + " on " + std::to_string(n) + " ranks (" +
                               ibcoll_algorithm(comm, IBCOLL_BCAST, count, c_type(type)) + ")";
      RANK_CHECK(ibcoll_bcast(data.data(), count, c_type(type), root, comm) == IBCOLL_SUCCESS,
                 what + ": " + ibcoll_last_error());
      for (size_t i = 0; i < data.size(); ++i)
        RANK_CHECK(data[i] == pattern(root, count, i),
                   what + ": wrong byte at " + std::to_string(i));
    }
  }
}

// The meetings of bcasts_whose_root_returns_first(comm, run) on `ranks` ranks.
inline std::vector<std::string> root_returns_first_meetings(const std::string& run, int ranks) {
  std::vector<std::string> names{"freed-" + run};
  for (int root = 0; root < ranks; ++root)
    names.push_back("returned-" + run + "-" + std::to_string(root));
  return names;
}
// A small bcast whose root returns once its messages are sent (the checked binomial, without
// slots), from every root in turn: each receiver calls only after the root has returned and
// filled its buffer again (a meeting outside ibcoll, so a root that waited for its receivers
// would time out), and gets what the root had. Then the same on a copy of `comm` that the root
// frees right after its call, before the receivers call (the free waits for them). `run` names
// the meetings (root_returns_first_meetings).
inline void bcasts_whose_root_returns_first(ibcoll_comm_t comm, const std::string& run) {
  constexpr size_t kBytes = 100;
  const int me = comm_rank(comm), n = comm_size(comm);
  expect_algorithm(comm, IBCOLL_BCAST, kBytes, IBCOLL_UINT8, "binomial");
  const std::vector<std::string> meetings = root_returns_first_meetings(run, n);
  // First a small allreduce, whose exchanges pair the members as the bcast's do: over verbs it
  // makes their connections, as a send that waits for a handshake keeps the root in its call.
  int64_t one = 1;
  RANK_CHECK(
      ibcoll_allreduce(IBCOLL_IN_PLACE, &one, 1, IBCOLL_INT64, IBCOLL_SUM, comm) == IBCOLL_SUCCESS,
      ibcoll_last_error());
  auto bcast = [&](ibcoll_comm_t on, int root, const std::string& meeting) {
    std::vector<uint8_t> data(kBytes, me == root ? 0xA5 : 0);
    if (me != root) meet_without_ibcoll(meeting, me, {root});
    RANK_CHECK(ibcoll_bcast(data.data(), kBytes, IBCOLL_UINT8, root, on) == IBCOLL_SUCCESS,
               meeting + ": " + ibcoll_last_error());
    if (me == root) {
      std::fill(data.begin(), data.end(), 0x5A);  // the caller's again
      meet_without_ibcoll(meeting, me, {root});
    }
    RANK_CHECK(me == root || data == std::vector<uint8_t>(kBytes, 0xA5),
               meeting + ": a receiver did not get what the root had when it called");
  };
  for (int root = 0; root < n; ++root)
    bcast(comm, root, meetings[static_cast<size_t>(root) + 1]);
  ibcoll_comm_t copy = nullptr;
  RANK_CHECK(ibcoll_comm_split(comm, 0, me, &copy) == IBCOLL_SUCCESS, ibcoll_last_error());
  bcast(copy, 0, meetings[0]);
  RANK_CHECK(ibcoll_comm_free(&copy) == IBCOLL_SUCCESS, ibcoll_last_error());
  one = 1;
  RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, &one, 1, IBCOLL_INT64, IBCOLL_SUM, comm) ==
                     IBCOLL_SUCCESS &&
                 one == n,
             std::string("the call after: ") + ibcoll_last_error());
}

// In the test: bcasts_whose_root_returns_first on the world of a job of each of `rank_counts`
// ranks started with `options`; `name` tells the runs' meetings from other tests'.
inline void expect_roots_return_first(const RankOptions& options,
                                      std::initializer_list<int> rank_counts,
                                      const std::string& name) {
  for (int ranks : rank_counts) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    const std::string run = name + "-" + std::to_string(ranks);
    expect_all_ok(run_ranks(
        ranks,
        [&run](int, int) {
          CapiRank r;
          bcasts_whose_root_returns_first(r.world(), run);
          return 0;
        },
        options));
    std::vector<int> everyone(static_cast<size_t>(ranks));
    std::iota(everyone.begin(), everyone.end(), 0);
    for (const std::string& meeting : root_returns_first_meetings(run, ranks))
      meeting_over(meeting, everyone);
  }
}

}  // namespace ibcoll::testing
