// Small calls in a steady stream make no heap allocation per call (a binary that uses this
// links tests/support/heap_count.cpp): the message path's records, the call's objects and the
// messages that arrive before their receives all come from memory kept from the calls before.
#pragma once

#include <initializer_list>
#include <string>

#include "tests/support/collectives.h"
#include "tests/support/heap_count.h"

namespace ibcoll::testing {

// In the test: on each of `rank_counts` ranks started with `options`, 8-byte allreduces, each
// followed by two bcasts (from every root in turn), all checked, warmed up by 200 rounds. Then
// 1000 more rounds may make at most one heap allocation per hundred calls on any rank: the few a
// rank makes when more calls or messages than ever before are under way at once (a rank preempted
// on a busy machine lets the others run ahead), never one per call or message. Skipped where
// allocations are not counted.
inline void expect_no_allocation_per_small_call(const RankOptions& options,
                                                std::initializer_list<int> rank_counts) {
  if (!heap_allocations()) GTEST_SKIP() << "allocations are not counted under AddressSanitizer";
  for (int ranks : rank_counts) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_all_ok(run_ranks(
        ranks,
        [](int me, int n) {
          CapiRank r;
          auto rounds = [&](int count) {
            for (int i = 0; i < count; ++i) {
              float values[2] = {static_cast<float>(me + 1), 2.0f}, sums[2] = {};
              RANK_CHECK(ibcoll_allreduce(values, sums, 2, IBCOLL_FLOAT32, IBCOLL_SUM, r.world()) ==
                             IBCOLL_SUCCESS,
                         ibcoll_last_error());
              RANK_CHECK(sums[0] == static_cast<float>(n * (n + 1) / 2) &&
                             sums[1] == 2.0f * static_cast<float>(n),
                         "a wrong sum");
              // Two from one root back to back: a root that returns before its receivers are done
              // may send the second while they still wait in the first.
              const int root = i % n;
              for (uint64_t second : {0u, 1u}) {
                const uint64_t sent = 0x5A5A0000u + 2 * static_cast<uint64_t>(i) + second;
                uint64_t word = me == root ? sent : 0;
                RANK_CHECK(ibcoll_bcast(&word, 1, IBCOLL_UINT64, root, r.world()) == IBCOLL_SUCCESS,
                           ibcoll_last_error());
                RANK_CHECK(word == sent, "a wrong bcast");
              }
            }
          };
          constexpr int kRounds = 1000;
          rounds(200);
          const uint64_t before = *heap_allocations();
          rounds(kRounds);
          const uint64_t made = *heap_allocations() - before;
          RANK_CHECK(made <= 3 * kRounds / 100, std::to_string(made) + " heap allocations in " +
                                                    std::to_string(kRounds) +
                                                    " allreduces and twice as many bcasts");
          return 0;
        },
        options));
  }
}

}  // namespace ibcoll::testing
