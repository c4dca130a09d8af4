// RAII owners for the plain verbs objects, and a process-wide count of the live ones (tests use
// it to prove that a failed set-up left nothing half-created). Destroy order is the owner's
// member order: declare what others depend on (PD, CQ, SRQ) before what uses them (QPs, MRs,
// AHs), so that the dependents are destroyed first.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>
#include <typeinfo>

namespace ibcoll::transport::verbs {

struct LiveObjects {
  std::atomic<int> contexts{0}, pds{0}, cqs{0}, srqs{0}, qps{0}, mrs{0}, ahs{0}, xrcds{0};
  std::atomic<int> peer_writable_mrs{0};  // of mrs: those a peer may RDMA-write into
};
LiveObjects& live_objects();

void report_destroy_failure(const char* what, int rc);  // logs; destructors cannot throw

template <typename T, int (*Destroy)(T*), std::atomic<int> LiveObjects::*Count>
struct VerbsDeleter {
  void operator()(T* object) const {
    if (int rc = Destroy(object)) {
      report_destroy_failure(typeid(T).name(), rc);
    } else {
      --(live_objects().*Count);
    }
  }
};

inline int close_xrcd(ibv_xrcd* xrcd) {
  return ibv_close_xrcd(xrcd);
}

using ProtectionDomain =
    std::unique_ptr<ibv_pd, VerbsDeleter<ibv_pd, ibv_dealloc_pd, &LiveObjects::pds>>;
using AddressHandle =
    std::unique_ptr<ibv_ah, VerbsDeleter<ibv_ah, ibv_destroy_ah, &LiveObjects::ahs>>;
using QueuePairHandle =
    std::unique_ptr<ibv_qp, VerbsDeleter<ibv_qp, ibv_destroy_qp, &LiveObjects::qps>>;
using XrcDomainHandle =
    std::unique_ptr<ibv_xrcd, VerbsDeleter<ibv_xrcd, close_xrcd, &LiveObjects::xrcds>>;

// What a registration lets the device do, at the least each use needs: a peer can reach only
// memory registered for remote write, which ibcoll grants a rendezvous receive's buffer alone,
// for as long as its transfer runs (longer only with IBCOLL_MR_CACHE).
enum class Access : int {
  device_reads = 0,                                                // what is sent from it
  device_writes = IBV_ACCESS_LOCAL_WRITE,                          // what is received into it
  peer_writes = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,  // an RDMA write's target
};

// Deregisters, counting the live registrations (and the peer-writable ones apart).
struct MemoryRegionDeleter {
  Access access = Access::device_reads;
  void operator()(ibv_mr* mr) const;
};
using MemoryRegion = std::unique_ptr<ibv_mr, MemoryRegionDeleter>;

// Each creator throws Error(system_error) naming the call and errno on failure.
ProtectionDomain allocate_pd(ibv_context* context);
// Registers [address, address + length) with `access`.
MemoryRegion register_memory(ibv_pd* pd, void* address, size_t length, Access access);
QueuePairHandle create_qp(ibv_pd* pd, ibv_qp_init_attr& init);  // init.cap is read back
// The extended form, for the XRC QP types (init.cap is read back).
QueuePairHandle create_qp_ex(ibv_context* context, ibv_qp_init_attr_ex& init);
// Another reference to an XRC TGT QP of `xrcd`: the QP lives while one is held. Empty if the
// domain has no TGT `qp_num` (EINVAL: its last holder has exited).
QueuePairHandle open_qp(ibv_context* context, ibv_xrcd* xrcd, uint32_t qp_num);
AddressHandle create_ah(ibv_pd* pd, ibv_ah_attr& attr);

}  // namespace ibcoll::transport::verbs
