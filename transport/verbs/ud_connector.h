// UdConnector: on-demand wire-up of RC connections over the process's UD QP.
//
// The first message to (or receive from) a peer creates an RC QP and sends a handshake request
// (QP number, PSN, credits) by datagram. The peer connects its own QP (creating it if needed),
// moves it to RTR/RTS and replies. The reply tells the initiator that the peer can receive, so
// the initiator connects and may send; the peer may send once it hears anything on the new RC
// connection (the initiator sends a `ready` message first). Simultaneous requests from both
// sides converge on the same pair of QPs. Unanswered requests are resent every
// handshake_retry; a peer silent past the timeout fails.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "transport/peer_map.h"
#include "transport/verbs/connection_manager.h"
#include "transport/verbs/device.h"
#include "transport/verbs/options.h"
#include "transport/verbs/queue_pair.h"
#include "transport/wire.h"

namespace ibcoll::transport::verbs {

class UdConnector final : public ConnectionManager {
 public:
  UdConnector(const ConnectionSetup& setup, uint32_t qkey, Listener& listener);

  EndpointAddress local_address() const override;
  void connect(int peer) override;
  ibv_qp* queue_pair(int peer) const override;
  QueueCaps caps(int peer) const override;
  uint32_t granted_credits(int peer) const override;
  bool on_completion(const ibv_wc& wc) override;
  void on_rc_message(int peer) override;
  void tick(Clock::time_point now) override;
  void forget(int peer) override;
  Stats stats() const override { return stats_; }

 private:
  enum class State { idle, requested, connected, ready, failed };
  struct Link {
    State state = State::idle;
    std::unique_ptr<RcQueuePair> qp;
    AddressHandle ah;
    uint32_t remote_qp_num = 0;
    uint64_t remote_incarnation = 0;
    uint32_t granted_credits = 0;
    Clock::time_point started{}, last_request{}, last_asked{};
    bool said_slow = false;  // the log said once that it takes longer than IBCOLL_TIMEOUT
  };

  void on_datagram(uint32_t slot, uint32_t byte_len);
  void create_queue_pair(int peer);
  void send_handshake(int peer, wire::Type type);
  void accept_remote(int peer, const wire::HandshakeMessage& message);
  Link& link(int peer) { return links_[peer]; }

  UdQueuePair ud_;
  PeerMap<Link> links_;           // the peers connected or being connected to
  std::vector<int> handshaking_;  // tick's list (a visit may fail a peer)
  Stats stats_;
};

}  // namespace ibcoll::transport::verbs
