// Whether a local peer's process can still answer, for the shared-memory transport's liveness
// checks (the channel's, and the slot region's waits).
#pragma once

#include <sys/types.h>

namespace ibcoll::transport::shm {

// False once the process is gone, or a zombie its parent has not reaped yet: either way it
// will not answer. True when it cannot tell.
bool process_alive(pid_t pid);

}  // namespace ibcoll::transport::shm
