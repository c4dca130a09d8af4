// The C++ layer (ibcoll.hpp) between forked ranks: typed allreduce and bcast, in place and not,
// a split communicator freed by its owner, a request waited on, and failures as exceptions
// carrying the status; agreeing and shrinking once a rank died.
#include <gtest/gtest.h>
#include <signal.h>

#include <numeric>
#include <vector>

#include "ibcoll/ibcoll.hpp"
#include "tests/support/forked_ranks.h"

namespace ibcoll::testing {
namespace {

TEST(CppApi, TypedCallsOwnersAndExceptions) {
  expect_all_ok(run_ranks(3, [](int me, int n) {
    api::Context context;
    const api::Communicator& world = context.world();
    RANK_CHECK(world.rank() == me && world.size() == n, "world rank and size");

    std::vector<double> in(1000, me + 1.0), out(1000);
    world.allreduce<double>(in, out, IBCOLL_SUM);
    RANK_CHECK(out == std::vector<double>(1000, n * (n + 1) / 2.0), "sum of doubles");

    std::vector<int32_t> values(7, me);
    world.allreduce<int32_t>(values, IBCOLL_MAX);
    RANK_CHECK(values == std::vector<int32_t>(7, n - 1), "in-place max");

    {
      const api::Communicator evens = world.split(me % 2 == 0 ? 0 : IBCOLL_UNDEFINED, me);
      RANK_CHECK(static_cast<bool>(evens) == (me % 2 == 0), "membership");
      if (evens) {
        std::vector<uint8_t> data(100, me == 0 ? 7 : 0);
        api::Request request = evens.ibcast<uint8_t>(data, 0);
        request.wait();
        RANK_CHECK(data == std::vector<uint8_t>(100, 7), "ibcast on the split");
      }
    }

    try {
      world.bcast<float>(std::span<float>(), n);  // root out of range
      RANK_CHECK(false, "no exception");
    } catch (const api::Error& e) {
      RANK_CHECK(e.status() == IBCOLL_ERR_INVALID_ARGUMENT, e.what());
      RANK_CHECK(std::string(e.what()).find("root") != std::string::npos, e.what());
    }
    return 0;
  }));
}

// 4 ranks, rank 3 dies: the others' call throws, agree() gives the AND and failed_ranks() {3},
// and shrink() a communicator of three that works.
TEST(CppApi, AgreeAndShrinkAfterADeath) {
  const std::vector<RankExit> exits = run_ranks(4, [](int me, int) {
    api::Context context;
    const api::Communicator& world = context.world();
    std::vector<float> data(64, 1.0f);
    world.allreduce<float>(data, IBCOLL_SUM);
    if (me == 3) raise(SIGKILL);
    try {
      world.allreduce<float>(data, IBCOLL_SUM);
      RANK_CHECK(false, "a call with rank 3 dead succeeded");
    } catch (const api::Error& e) {
      RANK_CHECK(e.status() == IBCOLL_ERR_PEER_FAILED, e.what());
    }
    RANK_CHECK(world.agree(me == 0 ? 0x3 : 0x7) == 0x3, "agreed flags");
    RANK_CHECK(world.failed_ranks() == std::vector<int>{3}, "failed ranks");
    const api::Communicator rest = world.shrink();
    RANK_CHECK(rest.size() == 3 && rest.rank() == me, "the shrunken communicator");
    std::vector<int32_t> ones(5, 1);
    rest.allreduce<int32_t>(ones, IBCOLL_SUM);
    RANK_CHECK(ones == std::vector<int32_t>(5, 3), "a sum over three");
    return 0;
  });
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_TRUE(exits[static_cast<size_t>(rank)].ok()) << describe(exits);
  EXPECT_EQ(exits[3].signal, SIGKILL) << describe(exits);
}

}  // namespace
}  // namespace ibcoll::testing
