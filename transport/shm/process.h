// What the shared-memory transport asks of a local peer's process: whether it can still answer
// (the channel's and the slot region's liveness checks), and reading its memory directly (the
// single-copy path for large messages).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace ibcoll::transport::shm {

// False once the process is gone, or a zombie its parent has not reaped yet: either way it
// will not answer. True when it cannot tell.
bool process_alive(pid_t pid);

// Copies `bytes` from `address` in process `pid` into `into` with process_vm_readv (CMA).
// Returns 0, or the errno that stopped it: EPERM where the kernel, a seccomp filter or Yama's
// ptrace scope forbids it, ENOSYS without CMA, ESRCH once the process is gone.
int read_process_memory(pid_t pid, uint64_t address, std::byte* into, size_t bytes);

}  // namespace ibcoll::transport::shm
