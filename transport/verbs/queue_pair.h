// Queue pairs. RcQueuePair: one reliable connection to one peer, receiving into the shared SRQ.
// UdQueuePair: the process's connectionless QP for handshakes, with its own receive ring
// (each receive starts with the 40-byte GRH). Capabilities are read back after creation.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>

#include "transport/verbs/device.h"
#include "transport/verbs/handles.h"

namespace ibcoll::transport::verbs {

// RC timing: ack timeout 4.096 µs * 2^17 ≈ 0.54 s, 7 transport retries, so a port that stops
// answering fails sends after about 4 s, beside the keepalive's 4 s (UCX waits 1 s x 7). At
// 67 ms x 7 a lossy or congested fabric (the multicast network between the test guests, a
// guest starved of CPU) failed live peers. rnr_retry 7 means "retry forever": an empty SRQ
// slows the sender instead of failing it (credits keep that rare).
constexpr uint8_t kAckTimeout = 17;
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetryInfinite = 7;
constexpr uint8_t kMinRnrTimer = 12;  // 0.64 ms

struct QueueCaps {
  uint32_t max_send_wr = 0;
  uint32_t max_inline_data = 0;
};

uint32_t random_psn();  // a fresh 24-bit packet sequence number
ibv_ah_attr address_to(const Device& device, const PortAddress& remote);
// Throws Error(system_error) naming the state and the QP.
void modify_qp(ibv_qp* qp, ibv_qp_attr& attr, int mask, const char* state);
// Into the error state, so that whatever is still posted flushes back (never throws: it runs
// while a peer is being failed).
void move_to_error(ibv_qp* qp);
// RESET → INIT on the device's port, allowing the peer `access` (IBV_ACCESS_* bits).
void move_to_init(const Device& device, ibv_qp* qp, int access);
// The attributes INIT → RTR and RTR → RTS give a QP of `type` (RC, XRC INI or TGT): the kernel
// refuses a mask with more or fewer than the type's required and optional attributes.
struct ConnectMasks {
  int rtr, rts;
};
ConnectMasks connect_masks(ibv_qp_type type);
// INIT → RTR → RTS towards `remote_qp_num` at `remote`, with this side's `psn` and the ack
// timeout, retries and RNR timer above, as far as the QP's type takes them (connect_masks).
void connect_to(const Device& device, ibv_qp* qp, const PortAddress& remote, uint32_t remote_qp_num,
                uint32_t remote_psn, uint32_t psn);

// The attributes of every RC QP ibcoll makes: one CQ for both directions, the shared SRQ.
ibv_qp_init_attr rc_init_attr(ibv_cq* cq, ibv_srq* srq, uint32_t send_depth);
// What the provider granted, read back from the attributes create filled in.
QueueCaps granted_caps(const ibv_qp_init_attr& init);

// A QP as created, with what the provider granted (read back from the create call's attributes).
struct CreatedQueuePair {
  QueuePairHandle qp;
  QueueCaps caps;
};

// A QP connected to one remote QP, as RC and XRC INI QPs are: made with its capabilities read
// back and moved to INIT by its kind's constructor, to RTR and RTS by connect().
class ConnectedQueuePair {
 public:
  uint32_t qp_num() const { return qp_->qp_num; }
  uint32_t psn() const { return psn_; }
  const QueueCaps& caps() const { return caps_; }
  ibv_qp* get() const { return qp_.get(); }
  // INIT → RTR → RTS towards the remote QP (for an XRC INI, the TGT its node made for it).
  void connect(const PortAddress& remote, uint32_t remote_qp_num, uint32_t remote_psn);

 protected:
  // `access`: what the peer may do to us (IBV_ACCESS_* bits).
  ConnectedQueuePair(CreatedQueuePair created, int access, const Device& device);

 private:
  const Device& device_;
  QueuePairHandle qp_;
  QueueCaps caps_;
  uint32_t psn_;
};

class RcQueuePair final : public ConnectedQueuePair {
 public:
  RcQueuePair(ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, uint32_t send_depth, const Device& device);
};

class UdQueuePair {
 public:
  static constexpr size_t kGrhBytes = 40;

  UdQueuePair(ibv_pd* pd, ibv_cq* cq, const Device& device, uint32_t qkey, uint32_t depth,
              size_t message_size);

  uint32_t qp_num() const { return qp_->qp_num; }
  uint32_t qkey() const { return qkey_; }
  // The datagram of a completed receive (after the GRH); repost it when done.
  const std::byte* payload(uint32_t index) const { return slot(index) + kGrhBytes; }
  void repost(uint32_t index);
  // Sends `length` bytes (copied into a registered slot) to the remote UD QP.
  void send(ibv_ah* ah, uint32_t remote_qp_num, const void* data, size_t length);
  void send_completed() { --sends_in_flight_; }
  AddressHandle make_address_handle(const PortAddress& remote) const;

 private:
  std::byte* slot(uint32_t index) const { return slab_.get() + size_t{index} * slot_size_; }

  const Device& device_;
  ibv_pd* pd_;
  uint32_t qkey_;
  uint32_t depth_;
  size_t slot_size_;
  std::unique_ptr<std::byte[]> slab_;  // depth receive slots, then depth send slots
  MemoryRegion mr_;
  QueuePairHandle qp_;  // last: destroyed first, while the slots it points into still exist
  uint32_t next_send_slot_ = 0;
  uint32_t sends_in_flight_ = 0;
  uint32_t max_send_wr_ = 0;
};

}  // namespace ibcoll::transport::verbs
