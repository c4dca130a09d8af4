// Resources that run out, between forked ranks on the host: a /dev/shm too small for the node's
// shared memory, and too few file descriptors for the TCP store. Each ends in a clear error on
// every rank, naming the resource, within seconds (never a SIGBUS, never a wait for the
// deadline), with nothing left behind in /dev/shm.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tests/support/collectives.h"
#include "tests/support/directory_entries.h"

namespace ibcoll::testing {
namespace {

using Clock = std::chrono::steady_clock;

// The node's shared memory is a 256 KiB tmpfs (a mount namespace of the test's own, so root):
// the segment's file is sparse, so it is made, and a page touched past the room would be a
// SIGBUS. Instead the creator gives pages before use, finds no room, and every rank's init
// fails naming /dev/shm, at once.
TEST(Exhaustion, ADevShmTooSmallFailsEveryRanksInitNamingIt) {
  constexpr int kCannotMount = 77;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=256k") != 0) {
      std::perror("a small /dev/shm");
      _exit(kCannotMount);
    }
    RankOptions options;
    options.environment = {{"IBCOLL_TIMEOUT", "60s"}};
    const auto start = Clock::now();
    const auto exits = run_ranks(
        4,
        [](int, int) {
          return init_fails(IBCOLL_ERR_SYSTEM, {"/dev/shm", "no room"});
        },
        options);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    bool all_ok = exits.size() == 4;
    for (const auto& e : exits)
      all_ok &= e.ok();
    const auto left = directory_entries("/dev/shm", "ibcoll-");
    std::fprintf(stderr, "%s; %.1f s; %zu files left in /dev/shm\n", describe(exits).c_str(),
                 seconds, left.size());
    _exit(all_ok && seconds < 10 && left.empty() ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "status " << status;
  if (WEXITSTATUS(status) == kCannotMount) {
    GTEST_SKIP() << "cannot mount a small /dev/shm here (needs root and mount namespaces)";
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << "see the ranks' lines above";
}

// Rank 0 serves the TCP store with too few descriptors to take a rank's connection. That rank
// (the first to connect: rank 0 itself, or another) is told why
// through a descriptor kept spare for it, and every rank waiting in the exchange learns it at
// once (the rank turned away will never join), where they waited out nine tenths of the
// deadline for "fewer ranks started than the job's size".
TEST(Exhaustion, TooFewDescriptorsForTheStoreFailEveryRanksInitNamingTheLimit) {
#if defined(__SANITIZE_ADDRESS__)  // the sanitized build has UBSan too
  GTEST_SKIP() << "UBSan's vptr check tests memory through a pipe: with no descriptor left it "
                  "reports every object it checks as invalid";
#endif
  RankOptions options;
  options.environment = {{"IBCOLL_TIMEOUT", "60s"}};
  const auto start = Clock::now();
  expect_all_ok(run_ranks(
      4,
      [](int me, int) {
        if (me == 0) {
          // Room for three new descriptors (the lowest free numbers below the limit): the
          // listener, the spare and its own connection's end; the store's first accept finds
          // none.
          std::vector<int> open_now;
          for (const std::string& fd : directory_entries("/proc/self/fd"))
            if (fd[0] != '.') open_now.push_back(std::stoi(fd));
          rlim_t limit = 0;
          while (limit - static_cast<rlim_t>(
                             std::count_if(open_now.begin(), open_now.end(),
                                           [&](int fd) { return rlim_t(fd) < limit; })) <
                 3)
            ++limit;
          const rlimit few{limit, limit};
          RANK_CHECK(setrlimit(RLIMIT_NOFILE, &few) == 0, "setrlimit");
        }
        return init_fails(IBCOLL_ERR_PEER_FAILED, {"Too many open files", "RLIMIT_NOFILE"});
      },
      options));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

}  // namespace
}  // namespace ibcoll::testing
