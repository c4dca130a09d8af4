#include "transport/ucx/ucx_handles.h"

#include <cstdlib>

#include "base/status.h"

namespace ibcoll::transport::ucx {

void check_ucs(ucs_status_t status, const char* what) {
  if (status != UCS_OK) {
    throw Error(Code::system_error, std::string("UCX: ") + what + ": " + ucs_status_string(status));
  }
}

UcpContext::UcpContext(bool wakeup, std::chrono::milliseconds keepalive) {
  ucp_config_t* config = nullptr;
  check_ucs(ucp_config_read(nullptr, nullptr, &config), "reading its configuration (UCX_*)");
  if (!std::getenv("UCX_KEEPALIVE_INTERVAL")) {
    const std::string interval = std::to_string(keepalive.count()) + "ms";
    const ucs_status_t status = ucp_config_modify(config, "KEEPALIVE_INTERVAL", interval.c_str());
    if (status != UCS_OK) ucp_config_release(config);
    check_ucs(status, "setting UCX_KEEPALIVE_INTERVAL from IBCOLL_KEEPALIVE");
  }
  ucp_params_t params{};
  params.field_mask =
      UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED | UCP_PARAM_FIELD_NAME;
  params.features = UCP_FEATURE_AM | (wakeup ? UCP_FEATURE_WAKEUP : 0);
  params.mt_workers_shared = 0;
  params.name = "ibcoll";
  const ucs_status_t status = ucp_init(&params, config, &context_);
  ucp_config_release(config);
  check_ucs(status, "ucp_init");
}

UcpContext::~UcpContext() {
  ucp_cleanup(context_);
}

UcpWorker::UcpWorker(const UcpContext& context, bool wakeup) {
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SINGLE;
  check_ucs(ucp_worker_create(context.get(), &params, &worker_), "ucp_worker_create");
  if (wakeup) {
    const ucs_status_t status = ucp_worker_get_efd(worker_, &event_fd_);
    if (status != UCS_OK) {
      ucp_worker_destroy(worker_);
      check_ucs(status, "ucp_worker_get_efd");
    }
  }
}

UcpWorker::~UcpWorker() {
  ucp_worker_destroy(worker_);
}

std::string UcpWorker::address() const {
  ucp_address_t* address = nullptr;
  size_t length = 0;
  check_ucs(ucp_worker_get_address(worker_, &address, &length), "ucp_worker_get_address");
  std::string bytes(reinterpret_cast<const char*>(address), length);
  ucp_worker_release_address(worker_, address);
  return bytes;
}

}  // namespace ibcoll::transport::ucx
