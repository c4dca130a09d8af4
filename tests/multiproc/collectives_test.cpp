// Allreduce and broadcast algorithms over the shared-memory channel between forked ranks:
// every (type, op), several counts, in place or not, every root; results against references
// computed here, and bitwise equality across ranks and runs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "collectives/half.h"
#include "collectives/reduce_kernels.h"
#include "collectives/registry.h"
#include "runtime/shm_endpoint.h"
#include "tests/support/exchange.h"

namespace ibcoll::testing {
namespace {

using collectives::CollectiveArgs;
using collectives::DataType;
using collectives::ReduceOp;

const DataType kTypes[] = {DataType::int8,     DataType::int16,   DataType::int32,
                           DataType::int64,    DataType::uint8,   DataType::uint16,
                           DataType::uint32,   DataType::uint64,  DataType::float16,
                           DataType::bfloat16, DataType::float32, DataType::float64};
const ReduceOp kOps[] = {ReduceOp::sum,  ReduceOp::prod, ReduceOp::min, ReduceOp::max,
                         ReduceOp::band, ReduceOp::bor,  ReduceOp::bxor};

// Small integers, exact in every type, so any reduction order gives the same bits and the
// reference (ranks folded in order) must match the algorithm exactly.
std::vector<std::byte> input(DataType type, int rank, size_t count) {
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

struct CollectiveRank : runtime::ShmEndpoint {
  uint64_t sequence = 0;
  collectives::Group group() {
    std::vector<int> peers(static_cast<size_t>(size()));
    for (int r = 0; r < size(); ++r)
      peers[static_cast<size_t>(r)] = r;
    return {channel(), rank(), peers};
  }
  Status run(collectives::Collective kind, const char* algorithm, CollectiveArgs args) {
    const auto& a = collectives::find_algorithm(kind, algorithm);
    auto task = a.make(group(), args, ++sequence << 8);
    return collectives::run_to_completion(*task, engine(), config().timeout);
  }
};

int allreduce_sweep(int, int) {
  CollectiveRank r;
  for (DataType type : kTypes) {
    for (ReduceOp op : kOps) {
      if (!collectives::check_reduction(type, op).ok()) continue;
      for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{1031}}) {
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
  r.store().barrier("end");
  return 0;
}

TEST(Collectives, AllreduceEveryTypeAndOpOneToFiveRanks) {
  for (int ranks = 1; ranks <= 5; ++ranks)
    expect_all_ok(run_ranks(ranks, allreduce_sweep));
}

// Random floats: the sum depends on the order of additions, so equal bits on every rank and
// in every run show that the order is fixed by the algorithm, not by arrival.
TEST(Collectives, AllreduceIsBitwiseIdenticalAcrossRanksAndRuns) {
  expect_all_ok(run_ranks(5, [](int me, int) {
    CollectiveRank r;
    std::mt19937 rng(static_cast<unsigned>(me) + 1);
    std::uniform_real_distribution<float> value(-1e6f, 1e6f);
    std::vector<float> mine(65537), first(mine.size()), second(mine.size());
    for (float& v : mine)
      v = value(rng);
    for (std::vector<float>* out : {&first, &second}) {
      const Status s =
          r.run(collectives::Collective::allreduce, "recursive_doubling",
                {mine.data(), out->data(), mine.size(), DataType::float32, ReduceOp::sum, 0});
      RANK_CHECK(s.ok(), s.to_string());
    }
    RANK_CHECK(std::memcmp(first.data(), second.data(), first.size() * 4) == 0,
               "two runs gave different bits");
    std::string bytes(reinterpret_cast<const char*>(first.data()), first.size() * 4);
    for (const std::string& other : r.store().allgather("result", bytes)) {
      RANK_CHECK(other == bytes, "ranks disagree on the bits of the sum");
    }
    return 0;
  }));
}

TEST(Collectives, BcastFromEveryRoot) {
  for (int ranks = 1; ranks <= 5; ++ranks) {
    expect_all_ok(run_ranks(ranks, [](int me, int n) {
      CollectiveRank r;
      for (int root = 0; root < n; ++root) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{65537}}) {
          std::vector<std::byte> data(count * 8);
          if (me == root) {
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
      r.store().barrier("end");
      return 0;
    }));
  }
}

// Ranks that disagree on the count get an error, not a hang and not silent garbage.
TEST(Collectives, MismatchedCountsFailOnEveryRank) {
  expect_all_ok(run_ranks(2, [](int me, int) {
    CollectiveRank r;
    std::vector<int32_t> data(20, 1), out(20);
    const size_t count = me == 0 ? 10 : 20;
    const Status s = r.run(collectives::Collective::allreduce, "recursive_doubling",
                           {data.data(), out.data(), count, DataType::int32, ReduceOp::sum, 0});
    RANK_CHECK(!s.ok(), "a mismatched allreduce succeeded");
    RANK_CHECK(s.code() == Code::truncated || s.code() == Code::mismatch, s.to_string());
    r.store().barrier("end");
    return 0;
  }));
  EXPECT_THROW(collectives::find_algorithm(collectives::Collective::bcast, "ring"), Error);
}

}  // namespace
}  // namespace ibcoll::testing
