// Resources that run out, between forked ranks on the host: a /dev/shm too small for the node's
// shared memory (at init, or at the calls), and too few file descriptors for the TCP store. Each
// ends in a clear error on every rank, naming the resource, within seconds (never a SIGBUS, never a
// wait for the deadline), with nothing left behind in /dev/shm.
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
#include <functional>
#include <string>
#include <vector>

#include "tests/support/collectives.h"
#include "tests/support/directory_entries.h"

namespace ibcoll::testing {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `body` on 4 forked ranks whose node's shared memory is a tmpfs of `size` (a mount
// namespace of the test's own, so root; skips without). Every rank must end well within
// seconds, and no file of the run may be left in /dev/shm.
void with_a_small_dev_shm(const char* size, RankOptions options,
                          const std::function<int(int, int)>& body) {
  constexpr int kCannotMount = 77;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string data = std::string("size=") + size;
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, data.c_str()) != 0) {
      std::perror("a small /dev/shm");
      _exit(kCannotMount);
    }
    options.environment["IBCOLL_TIMEOUT"] = "60s";
    const auto start = Clock::now();
    const auto exits = run_ranks(4, body, options);
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

// A 256 KiB /dev/shm: the segment's file is sparse, so it is made, and a page touched past the
// room would be a SIGBUS. Instead the creator gives pages before use, finds no room, and every
// rank's init fails naming /dev/shm, at once.
TEST(Exhaustion, ADevShmTooSmallFailsEveryRanksInitNamingIt) {
  with_a_small_dev_shm("256k", {}, [](int, int) {
    return init_fails(IBCOLL_ERR_SYSTEM, {"/dev/shm", "no room"});
  });
}

// A 2 MiB /dev/shm holds the segment's first parts but not the rings that calls up to 1 MiB
// fill between every pair (single copy off, so large messages go through them too). A rank
// whose ring finds no room leaves the node's shared memory; the others hear of it at their next
// liveness check, so every rank's call fails naming /dev/shm (never a SIGBUS, never a wait for
// the deadline), and each finalizes.
TEST(Exhaustion, ADevShmTooSmallForTheRingsFailsEveryRanksCallNamingIt) {
  RankOptions options;
  options.environment = {{"IBCOLL_SHM_SINGLE_COPY", "0"}};
  with_a_small_dev_shm("2m", options, [](int me, int size) {
    ibcoll_context_t context = nullptr;
    if (ibcoll_init(&context) != IBCOLL_SUCCESS) {  // the room may run out this early
      RANK_CHECK(std::strstr(ibcoll_last_error(), "/dev/shm"), ibcoll_last_error());
      return 0;
    }
    ibcoll_comm_t world = nullptr;
    RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_SUCCESS, ibcoll_last_error());
    std::vector<std::byte> buffer(1 << 20);
    ibcoll_status_t status = IBCOLL_SUCCESS;
    for (size_t bytes = 1024; bytes <= buffer.size() && status == IBCOLL_SUCCESS; bytes *= 32) {
      for (int root = 0; root < size && status == IBCOLL_SUCCESS; ++root)
        status = ibcoll_bcast(buffer.data(), bytes, IBCOLL_UINT8, root, world);
      if (status == IBCOLL_SUCCESS) {
        status = ibcoll_allreduce(IBCOLL_IN_PLACE, buffer.data(), bytes / 4, IBCOLL_INT32,
                                  IBCOLL_SUM, world);
      }
    }
    RANK_CHECK(status != IBCOLL_SUCCESS,
               "rank " + std::to_string(me) + ": every call succeeded on a 2 MiB /dev/shm");
    RANK_CHECK(std::strstr(ibcoll_last_error(), "/dev/shm"), ibcoll_last_error());
    RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
    return 0;
  });
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
