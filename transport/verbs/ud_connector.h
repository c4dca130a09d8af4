// UdConnector: on-demand wire-up of connections over the process's UD QP, RC or XRC.
//
// RC: the first message to (or receive from) a peer creates an RC QP and sends a handshake
// request (QP number, PSN, credits) by datagram. The peer connects its own QP (creating it if
// needed), moves it to RTR/RTS and replies. The reply tells the initiator that the peer can
// receive, so the initiator connects and may send; the peer may send once it hears anything on
// the new RC connection (the initiator sends a `ready` message first). Simultaneous requests
// from both sides converge on the same pair of QPs.
//
// XRC (the setup has an XRC domain): each direction of a pair is wired on its own, and a
// process has one INI QP per remote port. The first peer asked on a port makes the TGT QP for
// that INI and replies with its number, which connects the INI; the other peers of that port
// are asked only then, naming the TGT, and each opens it (ibv_open_qp) rather than making
// another. A reply grants credits and says the replier's SRQ number; the asker may then send.
// Answering a request, a process connects its own direction to the asker, through which its
// credit returns go. Incoming messages are known by their TGT's QP number, which names one
// remote INI and so one peer. The protocol is in docs/architecture.md ("XRC").
//
// Unanswered requests are resent every handshake_retry; a peer silent past the timeout is
// reported once and still waited for, unless Options::why_gone knows it gone.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "transport/peer_map.h"
#include "transport/verbs/connection_manager.h"
#include "transport/verbs/device.h"
#include "transport/verbs/options.h"
#include "transport/verbs/queue_pair.h"
#include "transport/verbs/xrc_initiators.h"
#include "transport/verbs/xrc_queue_pair.h"
#include "transport/wire.h"

namespace ibcoll::transport::verbs {

class UdConnector final : public ConnectionManager {
 public:
  UdConnector(const ConnectionSetup& setup, uint32_t qkey, Listener& listener);

  EndpointAddress local_address() const override;
  void connect(int peer) override;
  SendPath send_path(int peer) const override;
  uint32_t granted_credits(int peer) const override;
  bool on_completion(const ibv_wc& wc) override;
  void on_rc_message(int peer) override;
  void tick(Clock::time_point now) override;
  void forget(int peer) override;
  void release(int peer) override;
  Stats stats() const override { return stats_; }

 private:
  // RC: idle → requested (or straight to connected, answering) → connected → ready.
  // XRC: idle → requested → ready (or waiting in requested for the INI to connect).
  enum class State { idle, requested, connected, ready, failed };
  struct Link {
    State state = State::idle;
    std::unique_ptr<RcQueuePair> qp;                // RC
    XrcInitiators::Initiator* initiator = nullptr;  // XRC: ours, to the peer's port
    std::optional<XrcTarget> target;  // XRC: our reference to the TGT of the peer's INI
    uint32_t remote_initiator = 0;    // XRC: that INI's QP number
    uint32_t remote_srq_num = 0;      // XRC: the peer's SRQ, which our sends name
    AddressHandle ah;
    uint32_t remote_qp_num = 0;
    uint64_t remote_incarnation = 0;
    uint32_t granted_credits = 0;
    Clock::time_point started{}, last_request{}, last_asked{};
    bool said_slow = false;  // the log said once that it takes longer than IBCOLL_TIMEOUT
  };

  bool xrc() const { return setup_.xrcd != nullptr; }
  void on_datagram(uint32_t slot, uint32_t byte_len);
  void on_rc_handshake(int peer, Link& l, const wire::HandshakeMessage& message);
  void on_xrc_request(int peer, Link& l, const wire::HandshakeMessage& message);
  void on_xrc_reply(int peer, Link& l, const wire::HandshakeMessage& message);
  void on_xrc_refusal(int peer, Link& l, uint32_t refused_target);
  void create_queue_pair(int peer);
  // XRC: joins the INI through which `peer` is reached (made if the port has none); true if
  // the peer can be asked now (false: it waits for the INI's creator to answer).
  bool join_initiator(int peer, Link& l);
  // Waiting for another peer of its port to connect the INI: no request of its own yet.
  static bool waits_for_initiator(int peer, const Link& l);
  void send_handshake(int peer, wire::Type type);
  void send_refusal(int peer, uint32_t target_qp_num);
  // Addresses `m` to `peer` and sends it.
  void post_handshake(int peer, wire::HandshakeMessage& m);
  void accept_remote(int peer, const wire::HandshakeMessage& message);
  Link& link(int peer) { return links_[peer]; }

  UdQueuePair ud_;
  PeerMap<Link> links_;           // the peers connected or being connected to
  std::vector<int> handshaking_;  // tick's list (a visit may fail a peer)
  XrcInitiators initiators_;      // XRC: one INI per remote port talked to
  Stats stats_;
};

}  // namespace ibcoll::transport::verbs
