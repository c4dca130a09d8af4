#include "transport/verbs/handles.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/log.h"
#include "base/status.h"

namespace ibcoll::transport::verbs {

LiveObjects& live_objects() {
  static LiveObjects objects;
  return objects;
}

void report_destroy_failure(const char* what, int rc) {
  IBCOLL_LOG(warn, "destroying a verbs object (" << what << ") failed: " << std::strerror(rc)
                                                 << "; is something still using it?");
}

namespace {

// Whether CAP_IPC_LOCK is in this process's effective set (then RLIMIT_MEMLOCK does not apply).
bool may_lock_any_memory() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32));
}

}  // namespace

ProtectionDomain allocate_pd(ibv_context* context) {
  ProtectionDomain pd(ibv_alloc_pd(context));
  if (!pd) throw_errno("ibv_alloc_pd", errno);
  ++live_objects().pds;
  return pd;
}

MemoryRegion register_memory(ibv_pd* pd, void* address, size_t length, Access access) {
  MemoryRegion mr(ibv_reg_mr(pd, address, length, static_cast<int>(access)),
                  MemoryRegionDeleter{access});
  if (!mr) {
    const int err = errno;
    // Pinned pages count against the locked-memory limit, unless the process may lock any:
    // say it where it applies.
    rlimit locked{};
    const bool limited = (err == ENOMEM || err == EPERM) && !may_lock_any_memory() &&
                         getrlimit(RLIMIT_MEMLOCK, &locked) == 0 &&
                         locked.rlim_cur != RLIM_INFINITY;
    throw_errno("ibv_reg_mr of " + std::to_string(length) + " bytes" +
                    (limited ? " (the locked-memory limit, RLIMIT_MEMLOCK or ulimit -l, is " +
                                   std::to_string(locked.rlim_cur / 1024) + " KiB)"
                             : std::string()),
                err);
  }
  ++live_objects().mrs;
  if (access == Access::peer_writes) ++live_objects().peer_writable_mrs;
  return mr;
}

void MemoryRegionDeleter::operator()(ibv_mr* mr) const {
  if (int rc = ibv_dereg_mr(mr)) {
    report_destroy_failure("ibv_mr", rc);
    return;
  }
  --live_objects().mrs;
  if (access == Access::peer_writes) --live_objects().peer_writable_mrs;
}

QueuePairHandle create_qp(ibv_pd* pd, ibv_qp_init_attr& init) {
  QueuePairHandle qp(ibv_create_qp(pd, &init));
  if (!qp) {
    throw_errno("ibv_create_qp (" + std::to_string(init.cap.max_send_wr) + " send WRs)", errno);
  }
  ++live_objects().qps;
  return qp;
}

QueuePairHandle create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex& init) {
  QueuePairHandle qp(ibv_create_qp_ex(context, &init));
  if (!qp) {
    throw_errno(std::string("ibv_create_qp_ex (") +
                    (init.qp_type == IBV_QPT_XRC_SEND ? "XRC INI" : "XRC TGT") + ")",
                errno);
  }
  ++live_objects().qps;
  return qp;
}

QueuePairHandle open_qp(ibv_context* context, ibv_xrcd* xrcd, uint32_t qp_num) {
  ibv_qp_open_attr attr{};
  attr.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  attr.qp_num = qp_num;
  attr.xrcd = xrcd;
  attr.qp_type = IBV_QPT_XRC_RECV;
  QueuePairHandle qp(ibv_open_qp(context, &attr));
  if (!qp && errno == EINVAL) return qp;
  if (!qp) throw_errno("ibv_open_qp of XRC TGT QP " + std::to_string(qp_num), errno);
  ++live_objects().qps;
  return qp;
}

AddressHandle create_ah(ibv_pd* pd, ibv_ah_attr& attr) {
  AddressHandle ah(ibv_create_ah(pd, &attr));
  if (!ah) throw_errno("ibv_create_ah", errno);
  ++live_objects().ahs;
  return ah;
}

}  // namespace ibcoll::transport::verbs
