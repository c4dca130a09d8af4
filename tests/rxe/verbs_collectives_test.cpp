// The collective algorithms over the verbs channel, in the Soft-RoCE VM: a smaller sweep of
// types and sizes than on shared memory (emulation is slow), with 2, 3 and 4 ranks.
#include <gtest/gtest.h>

#include "runtime/verbs_endpoint.h"
#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

using VerbsRank = CollectiveRank<runtime::VerbsEndpoint>;

TEST(VerbsCollectives, AllreduceAndBcastTwoToFourRanks) {
  for (int ranks = 2; ranks <= 4; ++ranks) {
    expect_all_ok(run_ranks(ranks, [](int, int) {
      VerbsRank r;
      // Eager and rendezvous sizes; the types of each width, and both 16-bit floats.
      allreduce_sweep(r,
                      {DataType::int8, DataType::uint32, DataType::int64, DataType::float16,
                       DataType::bfloat16, DataType::float32, DataType::float64},
                      {0, 1, 1031, 65537});
      bcast_every_root(r, {0, 7, 65537});
      r.store().barrier("end");
      return 0;
    }));
  }
}

}  // namespace
}  // namespace ibcoll::testing
