#include "transport/verbs/xrc_queue_pair.h"

namespace ibcoll::transport::verbs {

namespace {

CreatedQueuePair create_initiator_qp(ibv_pd* pd, ibv_cq* cq, uint32_t send_depth,
                                     const Device& device) {
  ibv_qp_init_attr_ex init{};
  init.qp_type = IBV_QPT_XRC_SEND;
  init.comp_mask = IBV_QP_INIT_ATTR_PD;
  init.pd = pd;
  init.send_cq = cq;
  init.cap.max_send_wr = send_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_inline_data = 64;
  QueuePairHandle qp = create_qp_ex(device.context(), init);
  return {std::move(qp), {init.cap.max_send_wr, init.cap.max_inline_data}};
}

}  // namespace

// It only sends: no remote access to grant.
XrcInitiator::XrcInitiator(ibv_pd* pd, ibv_cq* cq, uint32_t send_depth, const Device& device)
    : ConnectedQueuePair(create_initiator_qp(pd, cq, send_depth, device), 0, device) {}

XrcTarget XrcTarget::create(const Device& device, ibv_xrcd* xrcd, const PortAddress& remote,
                            uint32_t initiator_qp_num, uint32_t initiator_psn) {
  ibv_qp_init_attr_ex init{};
  init.qp_type = IBV_QPT_XRC_RECV;
  init.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  init.xrcd = xrcd;
  QueuePairHandle qp = create_qp_ex(device.context(), init);
  // Rendezvous data arrives as RDMA writes through it, into the SRQ owner's registrations.
  move_to_init(device, qp.get(), IBV_ACCESS_REMOTE_WRITE);
  const uint32_t psn = random_psn();
  // RTS as well as RTR: a TGT only receives, but it answers with acknowledgements.
  connect_to(device, qp.get(), remote, initiator_qp_num, initiator_psn, psn);
  return XrcTarget(std::move(qp), psn);
}

std::optional<XrcTarget> XrcTarget::open(const Device& device, ibv_xrcd* xrcd, uint32_t qp_num) {
  QueuePairHandle qp = open_qp(device.context(), xrcd, qp_num);
  if (!qp) return std::nullopt;
  return XrcTarget(std::move(qp), 0);
}

}  // namespace ibcoll::transport::verbs
