// RAII owners of UCP's context and worker (the worker goes first: ~UcxChannel's member order).
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <string>

namespace ibcoll::transport::ucx {

// Throws Error(system_error) naming `what` and UCX's words for `status` unless it is UCS_OK.
void check_ucs(ucs_status_t status, const char* what);

class UcpContext {
 public:
  // Active messages (and the worker's event fd with `wakeup`), configured by UCX_* variables;
  // `keepalive` is UCX's keepalive interval where UCX_KEEPALIVE_INTERVAL does not set one.
  UcpContext(bool wakeup, std::chrono::milliseconds keepalive);
  ~UcpContext();
  UcpContext(const UcpContext&) = delete;
  UcpContext& operator=(const UcpContext&) = delete;
  ucp_context_h get() const { return context_; }

 private:
  ucp_context_h context_ = nullptr;
};

class UcpWorker {
 public:
  // One thread only (ibcoll's progress); `wakeup`: an event fd to sleep on.
  UcpWorker(const UcpContext& context, bool wakeup);
  ~UcpWorker();
  UcpWorker(const UcpWorker&) = delete;
  UcpWorker& operator=(const UcpWorker&) = delete;
  ucp_worker_h get() const { return worker_; }
  // What a peer needs to make an endpoint to this worker.
  std::string address() const;
  // The event fd (-1 without wakeup).
  int event_fd() const { return event_fd_; }

 private:
  ucp_worker_h worker_ = nullptr;
  int event_fd_ = -1;
};

}  // namespace ibcoll::transport::ucx
