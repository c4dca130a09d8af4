// The UCX channel's settings (runtime/config.cpp fills them from IBCOLL_* variables; UCX's own
// come from UCX_* ones).
#pragma once

#include <chrono>
#include <cstddef>

namespace ibcoll::transport::ucx {

struct Options {
  size_t eager_limit = 64 << 10;              // larger messages ask first (IBCOLL_EAGER_LIMIT)
  std::chrono::milliseconds liveness{60000};  // data moving at a cancel is waited for so long
  // UCX's keepalive interval, unless UCX_KEEPALIVE_INTERVAL says (UCX's own default, 20 s, would
  // leave a peer that is only received from unnoticed for that long once dead).
  std::chrono::milliseconds keepalive{1000};
  bool wakeup = false;  // IBCOLL_WAIT=event: the worker's event fd
};

}  // namespace ibcoll::transport::ucx
