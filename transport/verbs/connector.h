// Connector: on-demand wire-up of RC connections over the process's UD QP.
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
#include "transport/verbs/device.h"
#include "transport/verbs/options.h"
#include "transport/verbs/queue_pair.h"
#include "transport/wire.h"

namespace ibcoll::transport::verbs {

// What every other process needs to reach this one; exchanged through the bootstrap.
struct EndpointAddress {
  PortAddress port;
  uint32_t ud_qp_num = 0;
  uint32_t srq_num = 0;
  uint64_t incarnation = 0;
};

class Connector {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // The peer can receive on `peer`'s QP. `announce`: send it a `ready` message first.
    virtual void on_connected(int peer, bool announce) = 0;
    virtual void on_connect_failed(int peer, const Status& status) = 0;
  };

  struct Stats {
    uint64_t connections = 0;  // RC QPs created
    uint64_t handshakes_sent = 0;
    uint64_t handshake_retries = 0;
    uint64_t handshakes_dropped = 0;  // malformed, misrouted or stale datagrams
  };

  Connector(const Device& device, ibv_pd* pd, ibv_cq* cq, ibv_srq* srq, const Options& options,
            int rank, int size, uint32_t qkey, uint32_t send_depth, uint32_t credits,
            Listener& listener);

  EndpointAddress local_address(uint32_t srq_num) const;
  void set_peer_addresses(std::vector<EndpointAddress> addresses);

  // Starts connecting if nothing is under way; the QP exists from here on.
  RcQueuePair& connect(int peer);
  RcQueuePair* queue_pair(int peer) const;
  bool can_send(int peer) const;
  uint32_t granted_credits(int peer) const;  // credits the peer gave us in its handshake
  int peer_of_qp(uint32_t qp_num) const;

  void on_datagram(uint32_t slot, uint32_t byte_len);
  void on_datagram_sent() { ud_.send_completed(); }
  void on_rc_message(int peer);  // anything arriving on the RC QP proves the peer is RTS
  // Resends unanswered handshakes; fails peers past the deadline. Cheap when idle.
  void tick(Clock::time_point now);
  void forget(int peer);  // the peer failed: stop retrying it

  const Stats& stats() const { return stats_; }
  uint32_t ud_qp_num() const { return ud_.qp_num(); }

 private:
  enum class State { idle, requested, connected, ready, failed };
  struct Link {
    State state = State::idle;
    std::unique_ptr<RcQueuePair> qp;
    AddressHandle ah;
    uint32_t remote_qp_num = 0;
    uint64_t remote_incarnation = 0;
    uint32_t granted_credits = 0;
    Clock::time_point started{}, last_request{};
  };

  void send_handshake(int peer, wire::Type type);
  void accept_remote(int peer, const wire::HandshakeMessage& message);
  Link& link(int peer) { return links_[static_cast<size_t>(peer)]; }

  const Device& device_;
  ibv_pd* pd_;
  ibv_cq* cq_;
  ibv_srq* srq_;
  Options options_;
  int rank_, size_;
  uint32_t send_depth_, credits_;
  uint64_t incarnation_;
  Listener& listener_;
  UdQueuePair ud_;
  std::vector<EndpointAddress> addresses_;
  std::vector<Link> links_;
  std::unordered_map<uint32_t, int> peer_by_qp_;
  Stats stats_;
};

}  // namespace ibcoll::transport::verbs
