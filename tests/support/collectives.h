// Helpers for collective tests over any endpoint (shared memory on the host, verbs in the
// VM): every type and op, inputs whose reductions are exact in every type (so any order gives
// the same bits and a reference folded in rank order must match exactly), and a rank that
// runs a named algorithm to completion.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "collectives/half.h"
#include "collectives/reduce_kernels.h"
#include "collectives/registry.h"
#include "tests/support/exchange.h"

namespace ibcoll::testing {

using collectives::CollectiveArgs;
using collectives::DataType;
using collectives::ReduceOp;

inline const DataType kTypes[] = {DataType::int8,     DataType::int16,   DataType::int32,
                                  DataType::int64,    DataType::uint8,   DataType::uint16,
                                  DataType::uint32,   DataType::uint64,  DataType::float16,
                                  DataType::bfloat16, DataType::float32, DataType::float64};
inline const ReduceOp kOps[] = {ReduceOp::sum,  ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                                ReduceOp::band, ReduceOp::bor,  ReduceOp::bxor};

// Small integers, exact in every type, so any reduction order gives the same bits and the
// reference (ranks folded in order) must match the algorithm exactly.
inline std::vector<std::byte> input(DataType type, int rank, size_t count) {
  std::vector<std::byte> out(count * collectives::type_size(type));
  for (size_t i = 0; i < count; ++i) {
    const int v = static_cast<int>((static_cast<size_t>(rank) * 7 + i * 3) % 7) - 3;
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

template <typename Endpoint>
struct CollectiveRank : Endpoint {
  uint64_t sequence = 0;
  collectives::Group group() {
    std::vector<int> peers(static_cast<size_t>(this->size()));
    for (int r = 0; r < this->size(); ++r)
      peers[static_cast<size_t>(r)] = r;
    return {this->channel(), this->rank(), peers};
  }
  Status run(collectives::Collective kind, const char* algorithm, CollectiveArgs args) {
    const auto& a = collectives::find_algorithm(kind, algorithm);
    auto task = a.make(group(), args, ++sequence << 8);
    return collectives::run_to_completion(*task, this->engine(), this->config().timeout);
  }
};

// Runs allreduce for every valid (type, op) in `types` × every op, each count, in place and
// not, and checks the result against the reference; fails the rank on the first difference.
template <typename Endpoint>
void allreduce_sweep(CollectiveRank<Endpoint>& r, const std::vector<DataType>& types,
                     const std::vector<size_t>& counts) {
  for (DataType type : types) {
    for (ReduceOp op : kOps) {
      if (!collectives::check_reduction(type, op).ok()) continue;
      for (size_t count : counts) {
        std::vector<std::byte> want = input(type, 0, count);
        for (int other = 1; other < r.size(); ++other) {
          collectives::reduce(want.data(), input(type, other, count).data(), count, type, op);
        }
        for (bool in_place : {false, true}) {
          std::vector<std::byte> mine = input(type, r.rank(), count), out(mine.size());
          void* result = in_place ? mine.data() : out.data();
          const Status s = r.run(collectives::Collective::allreduce, "recursive_doubling",
                                 {mine.data(), result, count, type, op, 0});
          const std::string what = std::string(collectives::type_name(type)) + " " +
                                   collectives::op_name(op) + " count " + std::to_string(count) +
                                   (in_place ? " in place" : "");
          RANK_CHECK(s.ok(), what + ": " + s.to_string());
          RANK_CHECK(want.empty() || std::memcmp(result, want.data(), want.size()) == 0,
                     what + ": wrong result");
        }
      }
    }
  }
}

// Broadcasts `count` doubles from every root in turn and checks every byte on every rank.
template <typename Endpoint>
void bcast_every_root(CollectiveRank<Endpoint>& r, const std::vector<size_t>& counts) {
  for (int root = 0; root < r.size(); ++root) {
    for (size_t count : counts) {
      std::vector<std::byte> data(count * 8);
      if (r.rank() == root) {
        for (size_t i = 0; i < data.size(); ++i)
          data[i] = pattern_byte(root, 0, count, i);
      }
      const Status s =
          r.run(collectives::Collective::bcast, "binomial",
                {data.data(), data.data(), count, DataType::float64, ReduceOp::sum, root});
      RANK_CHECK(s.ok(), s.to_string());
      for (size_t i = 0; i < data.size(); ++i) {
        RANK_CHECK(data[i] == pattern_byte(root, 0, count, i),
                   "root " + std::to_string(root) + " count " + std::to_string(count));
      }
    }
  }
}

}  // namespace ibcoll::testing
