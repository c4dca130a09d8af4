// The C++ layer (ibcoll.hpp) between forked ranks: typed allreduce and bcast, in place and not,
// a split communicator freed by its owner, a request waited on, and failures as exceptions
// carrying the status.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace ibcoll::testing
