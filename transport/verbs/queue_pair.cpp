#include "transport/verbs/queue_pair.h"

#include <cstring>
#include <random>
#include <string>

#include "base/status.h"
#include "transport/verbs/work_id.h"

namespace ibcoll::transport::verbs {
uint32_t random_psn() {
  static thread_local std::mt19937 rng(std::random_device{}());
  return rng() & 0xffffff;
}

ibv_ah_attr address_to(const Device& device, const PortAddress& remote) {
  ibv_ah_attr ah{};
  ah.port_num = device.port();
  ah.dlid = remote.lid;
  if (remote.global) {
    ah.is_global = 1;
    std::memcpy(ah.grh.dgid.raw, remote.gid, sizeof(remote.gid));
    ah.grh.sgid_index = static_cast<uint8_t>(device.gid_index());
    ah.grh.hop_limit = 64;
  }
  return ah;
}

void modify_qp(ibv_qp* qp, ibv_qp_attr& attr, int mask, const char* state) {
  if (int rc = ibv_modify_qp(qp, &attr, mask)) {
    throw_errno(
        std::string("ibv_modify_qp to ") + state + " (QP " + std::to_string(qp->qp_num) + ")", rc);
  }
}

ConnectMasks connect_masks(ibv_qp_type type) {
  ConnectMasks masks{IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN,
                     IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN};
  if (type != IBV_QPT_XRC_SEND) {  // it answers no reads and sends no RNR NAKs
    masks.rtr |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  }
  if (type != IBV_QPT_XRC_RECV) {  // it sends no requests: nothing to retry, nothing to read
    masks.rts |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
  }
  return masks;
}

void connect_to(const Device& device, ibv_qp* qp, const PortAddress& remote, uint32_t remote_qp_num,
                uint32_t remote_psn, uint32_t psn) {
  const ConnectMasks masks = connect_masks(qp->qp_type);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = device.active_mtu();
  attr.dest_qp_num = remote_qp_num;
  attr.rq_psn = remote_psn;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = kMinRnrTimer;
  attr.ah_attr = address_to(device, remote);
  modify_qp(qp, attr, masks.rtr, "RTR");

  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = kAckTimeout;
  attr.retry_cnt = kRetryCount;
  attr.rnr_retry = kRnrRetryInfinite;
  attr.sq_psn = psn;
  attr.max_rd_atomic = 1;
  modify_qp(qp, attr, masks.rts, "RTS");
}

void move_to_error(ibv_qp* qp) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  ibv_modify_qp(qp, &attr, IBV_QP_STATE);
}

void move_to_init(const Device& device, ibv_qp* qp, int access) {
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = device.port();
  attr.qp_access_flags = static_cast<unsigned>(access);
  modify_qp(qp, attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
}

ibv_qp_init_attr rc_init_attr(ibv_cq* cq, ibv_srq* srq, uint32_t send_depth) {
  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.srq = srq;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = send_depth;
  init.cap.max_send_sge = 1;
  init.cap.max_inline_data = 64;  // header + small payloads go inline
  return init;
}

QueueCaps granted_caps(const ibv_qp_init_attr& init) {
  return {init.cap.max_send_wr, init.cap.max_inline_data};
}

ConnectedQueuePair::ConnectedQueuePair(CreatedQueuePair created, int access, const Device& device)
    : device_(device), qp_(std::move(created.qp)), caps_(created.caps), psn_(random_psn()) {
  move_to_init(device, qp_.get(), access);
}

void ConnectedQueuePair::connect(const PortAddress& remote, uint32_t remote_qp_num,
                                 uint32_t remote_psn) {
  connect_to(device_, qp_.get(), remote, remote_qp_num, remote_psn, psn_);
}

namespace {

CreatedQueuePair create_rc_qp(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, uint32_t send_depth) {
  ibv_qp_init_attr init = rc_init_attr(cq, srq, send_depth);
  QueuePairHandle qp = create_qp(pd, init);
  return {std::move(qp), granted_caps(init)};
}

}  // namespace

RcQueuePair::RcQueuePair(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, uint32_t send_depth,
                         const Device& device)
    : ConnectedQueuePair(create_rc_qp(pd, cq, srq, send_depth), IBV_ACCESS_REMOTE_WRITE, device) {}

UdQueuePair::UdQueuePair(ibv_pd* pd, ibv_cq* cq, const Device& device, uint32_t qkey,
                         uint32_t depth, size_t message_size)
    : device_(device),
      pd_(pd),
      qkey_(qkey),
      depth_(depth),
      slot_size_(kGrhBytes + message_size),
      slab_(new std::byte[size_t{2} * depth * (kGrhBytes + message_size)]) {
  mr_ = register_memory(pd, slab_.get(), size_t{2} * depth_ * slot_size_, Access::device_writes);

  ibv_qp_init_attr init{};
  init.send_cq = cq;
  init.recv_cq = cq;
  init.qp_type = IBV_QPT_UD;
  init.cap.max_send_wr = depth;
  init.cap.max_recv_wr = depth;
  init.cap.max_send_sge = 1;
  init.cap.max_recv_sge = 1;
  qp_ = create_qp(pd, init);
  max_send_wr_ = std::min(init.cap.max_send_wr, depth_);

  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.port_num = device.port();
  attr.qkey = qkey;
  modify_qp(qp_.get(), attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY, "INIT");
  attr = {};
  attr.qp_state = IBV_QPS_RTR;
  modify_qp(qp_.get(), attr, IBV_QP_STATE, "RTR");
  attr = {};
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = random_psn();
  modify_qp(qp_.get(), attr, IBV_QP_STATE | IBV_QP_SQ_PSN, "RTS");

  for (uint32_t i = 0; i < depth_; ++i)
    repost(i);
}

void UdQueuePair::repost(uint32_t index) {
  ibv_sge sge{reinterpret_cast<uint64_t>(slot(index)), static_cast<uint32_t>(slot_size_),
              mr_->lkey};
  ibv_recv_wr wr{};
  wr.wr_id = make_work_id(WorkKind::ud_receive, index);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ibv_recv_wr* bad = nullptr;
  if (int rc = ibv_post_recv(qp_.get(), &wr, &bad)) throw_errno("ibv_post_recv (UD)", rc);
}

void UdQueuePair::send(ibv_ah* ah, uint32_t remote_qp_num, const void* data, size_t length) {
  if (sends_in_flight_ >= max_send_wr_) {
    // Handshakes are retried by timer: a datagram dropped here is like one lost on the wire.
    return;
  }
  std::byte* slot_bytes = slot(depth_ + next_send_slot_);
  next_send_slot_ = (next_send_slot_ + 1) % depth_;
  std::memcpy(slot_bytes, data, length);
  ibv_sge sge{reinterpret_cast<uint64_t>(slot_bytes), static_cast<uint32_t>(length), mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_work_id(WorkKind::ud_send, 0);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.ud.ah = ah;
  wr.wr.ud.remote_qpn = remote_qp_num;
  wr.wr.ud.remote_qkey = qkey_;
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp_.get(), &wr, &bad)) throw_errno("ibv_post_send (UD)", rc);
  ++sends_in_flight_;
}

AddressHandle UdQueuePair::make_address_handle(const PortAddress& remote) const {
  ibv_ah_attr attr = address_to(device_, remote);
  return create_ah(pd_, attr);
}

}  // namespace ibcoll::transport::verbs
