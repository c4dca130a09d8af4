// The shared-memory transport's settings (from IBCOLL_* variables, see runtime/config).
#pragma once

#include <chrono>
#include <cstddef>

namespace ibcoll::transport::shm {

struct ShmOptions {
  // How often a waiting rank checks that its peers' processes still exist.
  std::chrono::milliseconds liveness_interval{100};
  // Messages of at least this many bytes are read straight from the sender (single copy);
  // 0 copies everything through the rings. Off by default: on the machines measured so far
  // the kernel's copy (process_vm_readv, about 13 GB/s) lost to the rings' two user-space
  // copies at every size (docs/architecture.md has the numbers).
  size_t single_copy_threshold = 0;
};

}  // namespace ibcoll::transport::shm
