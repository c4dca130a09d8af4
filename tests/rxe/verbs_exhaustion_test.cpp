// Locked memory that runs out, over verbs in the VM (IBCOLL_TRANSPORT=verbs): a rank without
// CAP_IPC_LOCK (with it, as root has, the kernel ignores the limit) whose RLIMIT_MEMLOCK cannot
// hold its registrations. Every rank's init fails at once, naming the limit.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <string>

#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

// Takes CAP_IPC_LOCK out of this process's effective and permitted sets.
bool drop_ipc_lock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  const uint32_t bit = 1u << (CAP_IPC_LOCK % 32);
  data[CAP_IPC_LOCK / 32].effective &= ~bit;
  data[CAP_IPC_LOCK / 32].permitted &= ~bit;
  return syscall(SYS_capset, &header, data) == 0;
}

TEST(VerbsExhaustion, TooLittleLockedMemoryFailsEveryRanksInitNamingTheLimit) {
  RankOptions options;
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}, {"IBCOLL_TIMEOUT", "60s"}};
  const auto start = std::chrono::steady_clock::now();
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        if (me == 1) {
          RANK_CHECK(drop_ipc_lock(), std::string("capset: ") + std::strerror(errno));
          const rlimit little{64 << 10, 64 << 10};
          RANK_CHECK(setrlimit(RLIMIT_MEMLOCK, &little) == 0, "setrlimit");
        }
        return init_fails(IBCOLL_ERR_SYSTEM, {"RLIMIT_MEMLOCK", "64 KiB"});
      },
      options));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace ibcoll::testing
