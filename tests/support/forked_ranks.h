// Forked ranks for multi-process tests (Gloo-style): runtime's local launcher forks the ranks;
// children report failures through their exit status (RANK_CHECK), never through gtest.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "runtime/bootstrap/local_launch.h"

namespace ibcoll::testing {

using runtime::describe;
using runtime::RankExit;
using RankOptions = runtime::LaunchOptions;

inline std::vector<RankExit> run_ranks(int size, const std::function<int(int rank, int size)>& body,
                                       const RankOptions& options = {}) {
  return runtime::launch_local_ranks(size, body, options);
}

// In a rank: marks `me` as arrived at `name` (a file in /tmp) and waits, at most a minute, until
// every rank of `ranks` has, without ibcoll (a test whose job has lost a rank has no barrier
// left): survivors that must not leave before the others have their answers meet here.
void meet_without_ibcoll(const std::string& name, int me, const std::vector<int>& ranks);
// In the test, once the ranks have exited: removes the meeting's files.
void meeting_over(const std::string& name, const std::vector<int>& ranks);

// In the test: every rank exited 0.
inline void expect_all_ok(const std::vector<RankExit>& exits) {
  for (const auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

[[noreturn]] void rank_check_failed(const char* condition, const char* file, int line,
                                    const std::string& detail);

}  // namespace ibcoll::testing

// In a rank: fails the rank (exit 1) with the condition, place and detail when false.
#define RANK_CHECK(cond, detail)                                                          \
  do {                                                                                    \
    if (!(cond)) ::ibcoll::testing::rank_check_failed(#cond, __FILE__, __LINE__, detail); \
  } while (0)
