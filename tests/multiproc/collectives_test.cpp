// Allreduce and broadcast algorithms over the shared-memory channel between forked ranks:
// every (type, op), several counts, in place or not, every root; results against references
// computed here, and bitwise equality across ranks and runs.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "runtime/shm_endpoint.h"
#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

using ShmRank = CollectiveRank<runtime::ShmEndpoint>;

int allreduce_sweep_over_shm(int, int) {
  ShmRank r;
  allreduce_sweep(r, {std::begin(kTypes), std::end(kTypes)}, {0, 1, 7, 1031});
  r.store().barrier("end");
  return 0;
}

TEST(Collectives, AllreduceEveryTypeAndOpOneToFiveRanks) {
  for (int ranks = 1; ranks <= 5; ++ranks)
    expect_all_ok(run_ranks(ranks, allreduce_sweep_over_shm));
}

// Random floats: the sum depends on the order of additions, so equal bits on every rank and
// in every run show that the order is fixed by the algorithm, not by arrival.
TEST(Collectives, AllreduceIsBitwiseIdenticalAcrossRanksAndRuns) {
  expect_all_ok(run_ranks(5, [](int me, int) {
    ShmRank r;
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
    expect_all_ok(run_ranks(ranks, [](int, int) {
      ShmRank r;
      bcast_every_root(r, {0, 1, 7, 65537});
      r.store().barrier("end");
      return 0;
    }));
  }
}

// Ranks that disagree on the count get an error, not a hang and not silent garbage.
TEST(Collectives, MismatchedCountsFailOnEveryRank) {
  expect_all_ok(run_ranks(2, [](int me, int) {
    ShmRank r;
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
