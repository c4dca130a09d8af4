// The XRC queue pairs, for a device and IBCOLL_XRC that give an XRC domain (Soft-RoCE has none:
// this code has not run on a device; see docs/architecture.md, "XRC").
// XrcInitiator: the INI QP (IBV_QPT_XRC_SEND) through which this process sends to every process
// on one remote port; each send names its target process by that process's SRQ number.
// XrcTarget: this process's reference to a TGT QP (IBV_QPT_XRC_RECV) of the node's XRC domain,
// the receiving end of one remote INI. The first process of the node that the initiator reaches
// creates it; every other one it reaches opens it (ibv_open_qp). The kernel destroys a TGT when
// its last reference goes, so it lives while a process it delivers to does.
#pragma once

#include <optional>

#include <infiniband/verbs.h>

#include <cstdint>

#include "transport/verbs/device.h"
#include "transport/verbs/handles.h"
#include "transport/verbs/queue_pair.h"

namespace ibcoll::transport::verbs {

class XrcInitiator final : public ConnectedQueuePair {
 public:
  XrcInitiator(ibv_pd* pd, ibv_cq* cq, uint32_t send_depth, const Device& device);
};

class XrcTarget {
 public:
  // A new TGT in `xrcd`, connected to the INI `initiator_qp_num` at `remote`.
  static XrcTarget create(const Device& device, ibv_xrcd* xrcd, const PortAddress& remote,
                          uint32_t initiator_qp_num, uint32_t initiator_psn);
  // Another reference to the TGT `qp_num` that a process of this node made; none if no process
  // holds it any more.
  static std::optional<XrcTarget> open(const Device& device, ibv_xrcd* xrcd, uint32_t qp_num);

  uint32_t qp_num() const { return qp_->qp_num; }
  uint32_t psn() const { return psn_; }

 private:
  XrcTarget(QueuePairHandle qp, uint32_t psn) : qp_(std::move(qp)), psn_(psn) {}

  QueuePairHandle qp_;
  uint32_t psn_;
};

}  // namespace ibcoll::transport::verbs
