// Non-blocking collectives through the C API between forked ranks: many calls in flight at
// once on two communicators, completed in any order (each rank its own), by wait or by test.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

// One call in flight and what it must produce.
struct Pending {
  ibcoll_request_t request = nullptr;
  std::vector<std::byte> buffer, want;
  std::string what;
};

enum class Finish { wait_in_order, wait_reversed, wait_shuffled, test_until_done };

// Starts 16 calls alternating between the world and a reversed copy of it, allreduce and bcast,
// small and large, then finishes them as `finish` says.
int overlapping_calls(int me, Finish finish) {
  CapiRank r;
  const int n = r.size();
  ibcoll_comm_t reversed = nullptr;
  RANK_CHECK(ibcoll_comm_split(r.world(), 0, n - me, &reversed) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  const DataType types[] = {DataType::float32, DataType::int16, DataType::bfloat16,
                            DataType::uint64};
  const ReduceOp ops[] = {ReduceOp::sum, ReduceOp::max, ReduceOp::prod, ReduceOp::bxor};
  std::vector<Pending> calls(16);
  for (size_t i = 0; i < calls.size(); ++i) {
    Pending& c = calls[i];
    ibcoll_comm_t comm = i % 2 ? reversed : r.world();
    const size_t count = i % 3 == 0 ? 100003 : 17 + i;
    const DataType type = types[i % 4];
    if (i % 4 != 3) {
      const ReduceOp op = ops[i % 4];
      c.buffer = input(type, op, comm_rank(comm), count);
      c.want = reference(type, op, n, count);
      c.what = "iallreduce #" + std::to_string(i);
      RANK_CHECK(ibcoll_iallreduce(IBCOLL_IN_PLACE, c.buffer.data(), count, c_type(type), c_op(op),
                                   comm, &c.request) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
    } else {
      const int root = static_cast<int>(i) % n;
      c.want.resize(count * collectives::type_size(type));
      for (size_t b = 0; b < c.want.size(); ++b)
        c.want[b] = pattern(root, i, b);
      c.buffer = comm_rank(comm) == root ? c.want : std::vector<std::byte>(c.want.size());
      c.what = "ibcast #" + std::to_string(i);
      RANK_CHECK(ibcoll_ibcast(c.buffer.data(), count, c_type(type), root, comm, &c.request) ==
                     IBCOLL_SUCCESS,
                 ibcoll_last_error());
    }
  }
  std::vector<size_t> order(calls.size());
  std::iota(order.begin(), order.end(), 0);
  if (finish == Finish::wait_reversed) std::reverse(order.begin(), order.end());
  if (finish == Finish::wait_shuffled) {
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(me) * 7919));
  }
  if (finish == Finish::test_until_done) {
    size_t left = calls.size();
    while (left > 0) {
      left = 0;
      for (Pending& c : calls) {
        int done = 0;
        RANK_CHECK(ibcoll_test(c.request, &done) == IBCOLL_SUCCESS,
                   c.what + ": " + ibcoll_last_error());
        left += !done;
      }
    }
  }
  for (size_t i : order) {
    Pending& c = calls[i];
    RANK_CHECK(ibcoll_wait(c.request) == IBCOLL_SUCCESS, c.what + ": " + ibcoll_last_error());
    RANK_CHECK(c.buffer == c.want, c.what + ": wrong result");
    RANK_CHECK(ibcoll_request_free(&c.request) == IBCOLL_SUCCESS && !c.request,
               ibcoll_last_error());
  }
  RANK_CHECK(ibcoll_comm_free(&reversed) == IBCOLL_SUCCESS, ibcoll_last_error());
  return 0;
}

TEST(Requests, SixteenOverlappingCallsOnTwoCommunicatorsAnyOrder) {
  for (Finish finish : {Finish::wait_in_order, Finish::wait_reversed, Finish::wait_shuffled,
                        Finish::test_until_done}) {
    for (int ranks : {2, 3, 4}) {
      SCOPED_TRACE("finish " + std::to_string(static_cast<int>(finish)) + ", " +
                   std::to_string(ranks) + " ranks");
      expect_all_ok(
          run_ranks(ranks, [finish](int me, int) { return overlapping_calls(me, finish); }));
    }
  }
}

// Freeing a running request waits for it first; finalize refuses while anything is open.
TEST(Requests, FreeWaitsAndFinalizeRefusesOpenObjects) {
  expect_all_ok(run_ranks(3, [](int, int) {
    CapiRank r;
    std::vector<double> data(50000, 1.0);
    ibcoll_request_t request = nullptr;
    RANK_CHECK(ibcoll_iallreduce(IBCOLL_IN_PLACE, data.data(), data.size(), IBCOLL_FLOAT64,
                                 IBCOLL_SUM, r.world(), &request) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(ibcoll_finalize(r.context()) == IBCOLL_ERR_INVALID_ARGUMENT,
               "finalize with a request open");
    RANK_CHECK(std::string(ibcoll_last_error()).find("1 requests") != std::string::npos,
               ibcoll_last_error());
    RANK_CHECK(ibcoll_request_free(&request) == IBCOLL_SUCCESS, ibcoll_last_error());
    RANK_CHECK(data.front() == 3.0 && data.back() == 3.0, "the freed request completed");
    return 0;
  }));
}

}  // namespace
}  // namespace ibcoll::testing
