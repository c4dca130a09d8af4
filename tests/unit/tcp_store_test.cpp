// TcpStore across real forked processes on loopback: allgather/barrier, waiting gets, the
// job secret, and deadlines.
#include <gtest/gtest.h>

#include <cstdlib>

#include "base/status.h"
#include "runtime/bootstrap/launch_env.h"
#include "runtime/bootstrap/tcp_store.h"
#include "tests/support/forked_ranks.h"

namespace ibcoll::runtime {
namespace {

using testing::describe;
using testing::run_ranks;

TcpStore open_store(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  LaunchInfo info = launch_info_from_environment();
  return TcpStore(std::getenv("IBCOLL_BOOTSTRAP"), info.rank, info.size, info.secret, timeout);
}

TEST(TcpStore, AllgatherAndBarrierAcrossProcesses) {
  auto exits = run_ranks(5, [](int rank, int size) {
    TcpStore store = open_store();
    auto all = store.allgather("names", "rank-" + std::to_string(rank));
    RANK_CHECK(all.size() == static_cast<size_t>(size), "allgather size");
    for (int r = 0; r < size; ++r)
      RANK_CHECK(all[r] == "rank-" + std::to_string(r), all[r]);
    // A get issued before the set waits for it.
    if (rank == 1) store.set("late", std::string(100000, 'z'));
    RANK_CHECK(store.get("late") == std::string(100000, 'z'), "late value");
    store.barrier("done");
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

TEST(TcpStore, WrongSecretIsRejected) {
  auto exits = run_ranks(2, [](int rank, int) {
    if (rank == 1) setenv("IBCOLL_JOB_SECRET", "not-the-secret", 1);
    try {
      TcpStore store = open_store(std::chrono::seconds(3));
      if (rank == 1) RANK_CHECK(false, "joined with a wrong secret");
      // Rank 0 serves; it must not see rank 1's data.
      store.set("ok", "1");
    } catch (const Error& e) {
      RANK_CHECK(rank == 1, e.what());
      RANK_CHECK(std::string(e.what()).find("IBCOLL_JOB_SECRET") != std::string::npos, e.what());
    }
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

TEST(TcpStore, MissingKeyTimesOutAndBadAddressIsNamed) {
  auto exits = run_ranks(1, [](int, int) {
    TcpStore store = open_store(std::chrono::milliseconds(300));
    try {
      store.get("never-set");
      RANK_CHECK(false, "get of a missing key returned");
    } catch (const Error& e) {
      RANK_CHECK(e.status().code() == Code::timeout, e.what());
    }
    try {
      store.get("another");
      RANK_CHECK(false, "the store was used after a timeout");
    } catch (const Error& e) {
      RANK_CHECK(
          std::string(e.what()).find("unusable after an earlier timeout") != std::string::npos,
          e.what());
    }
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
  EXPECT_THROW(parse_host_port("localhost"), Error);
  EXPECT_THROW(parse_host_port("localhost:99999"), Error);
  EXPECT_EQ(parse_host_port("[::1]:80").first, "::1");
  EXPECT_THROW(TcpStore("127.0.0.1:1", 1, 2, "", std::chrono::milliseconds(10)), Error);
}

}  // namespace
}  // namespace ibcoll::runtime
