// UnmapWatch: which address ranges have left this process's address space (munmap, mremap's
// old range, shmdt, a shrinking brk, madvise DONTNEED), told by libucm's UCM_EVENT_VM_UNMAPPED
// hooks, so that a registration cache never hands out a registration of pages that are gone
// (a buffer freed and another mapped at the same address would otherwise meet the old one's
// pages). One per process: libucm's hooks are the process's, and Open MPI's UCX may have set
// them up already (its handlers and ours are then called alike).
//
// libucm calls the handler before the memory goes, on whatever thread unmaps it, and the
// handler must not allocate; so it only appends the range to a fixed ring under a spin flag,
// and a cache reads what is new (`since`) before each look-up. A reader that fell more than the
// ring behind is told so and drops everything it holds.
#pragma once

#include <cstdint>
#include <string>

#include "base/function_ref.h"

namespace ibcoll::transport::ucx {

struct AddressRange {
  uintptr_t begin = 0, end = 0;
};

class UnmapWatch {
 public:
  static constexpr uint64_t kRing = 1024;
#if defined(__SANITIZE_ADDRESS__)
  // AddressSanitizer's heap maps and unmaps with raw system calls that no hook sees, so what
  // malloc gives and free takes back escapes the watch there: a cache must not rely on it.
  static constexpr bool kSeesTheHeap = false;
#else
  static constexpr bool kSeesTheHeap = true;
#endif

  // Installs the handler (the first call; later calls return its outcome): empty when unmaps are
  // reported, else why not (built without UCX, libucm refused, or its hooks were found not to
  // fire). Thread-safe.
  static const std::string& start();
  static bool watching() {
    return start().empty();
  }

  // Ranges unmapped since position `seen` (0 at first), oldest first; returns the position to
  // pass next time. `lost` is set when some were overwritten before this read: take every
  // range as gone. Cheap when nothing is new (one atomic load).
  static uint64_t since(uint64_t seen, FunctionRef<void(AddressRange)> each, bool& lost);
  // The position now: what a new reader starts from.
  static uint64_t position();
};

}  // namespace ibcoll::transport::ucx
