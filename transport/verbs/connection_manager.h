// ConnectionManager: how a verbs channel gets a connection to a peer, made on demand: an RC QP
// of its own, or (XRC) the INI QP to the peer's node, shared with the node's other processes.
// Two implementations: UdConnector (handshake datagrams over the process's UD QP, the default;
// RC or XRC) and RdmaCmConnector (librdmacm, IP addressing; RC only). The channel sees only
// this interface.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "base/deadline.h"
#include "base/status.h"
#include "transport/verbs/device.h"
#include "transport/verbs/options.h"
#include "transport/verbs/queue_pair.h"

namespace ibcoll::transport::verbs {

// What every other process needs to reach this one; exchanged through the bootstrap.
struct EndpointAddress {
  PortAddress port;
  uint32_t ud_qp_num = 0;    // UdConnector
  uint32_t srq_num = 0;      // XRC addressing (0 without XRC)
  uint64_t incarnation = 0;  // this endpoint's generation: a restarted peer is not confused
  uint8_t ip[16] = {};       // RdmaCmConnector: IPv6, or IPv4-mapped IPv6
  uint16_t cm_port = 0;      // RdmaCmConnector: the listening port
  uint8_t xrc = 0;           // 1: it sends and receives through XRC (every rank must agree)
};

// The QP a peer's sends are posted on and how they name it. RC: the peer's own QP. XRC: the INI
// QP of the peer's node (other peers share it), and the peer's SRQ number in every send.
struct SendPath {
  ibv_qp* qp = nullptr;
  QueueCaps caps;
  uint32_t remote_srq_num = 0;  // XRC only
};

// What a connection manager needs to make RC QPs and to speak for this endpoint.
struct ConnectionSetup {
  const Device& device;
  ibv_pd* pd;
  ibv_cq* cq;        // for both directions of every QP
  ibv_srq* srq;      // shared by every QP
  ibv_xrcd* xrcd;    // XRC: the node's domain, where srq is an XRC SRQ; null for RC
  uint32_t srq_num;  // XRC: srq's number, which the peers' sends name
  Options options;
  int rank;
  int size;
  uint32_t send_depth;   // send work requests per QP
  uint64_t incarnation;  // this endpoint's generation
};

class ConnectionManager {
 public:
  class Listener {
   public:
    virtual ~Listener() = default;
    // The peer's QP can receive. `announce`: tell it ours can too (send a `ready` message).
    virtual void on_connected(int peer, bool announce) = 0;
    virtual void on_connect_failed(int peer, const Status& status) = 0;
    // The peer's process is known gone (Options::why_gone): fail it as a dead peer.
    virtual void on_peer_gone(int peer, const Status& status) = 0;
    // The receive credits we grant `peer`, told in the handshake: the same on every call.
    virtual uint32_t credits_for(int peer) = 0;
  };

  struct Stats {
    uint64_t connections = 0;  // RC connections made (a losing simultaneous attempt is not one)
    uint64_t handshakes_sent = 0;
    uint64_t handshake_retries = 0;
    uint64_t handshakes_dropped = 0;  // malformed, misrouted, stale or refused
  };

  ConnectionManager(const ConnectionSetup& setup, Listener& listener)
      : setup_(setup), listener_(listener) {}
  virtual ~ConnectionManager() = default;

  virtual EndpointAddress local_address() const = 0;
  // Every rank's address, indexed by rank. Throws Error(invalid_argument) on a wrong count, and
  // Error(mismatch) naming a rank that uses XRC where this one uses RC, or the other way round
  // (IBCOLL_XRC=auto found XRC on some nodes only).
  void set_peer_addresses(std::vector<EndpointAddress> addresses);
  // Starts connecting if nothing is under way. Throws Error if the attempt cannot start.
  virtual void connect(int peer) = 0;
  // Where sends to a connected peer go (qp null before), and the credits it granted.
  virtual SendPath send_path(int peer) const = 0;
  virtual uint32_t granted_credits(int peer) const = 0;
  int peer_of_qp(uint32_t qp_num) const;  // -1 for a QP that is not ours

  // Completions of the manager's own work requests (UD datagrams); false if not ours.
  virtual bool on_completion(const ibv_wc& wc) = 0;
  virtual void on_rc_message(int peer) = 0;  // anything arrived from `peer` over RC
  // Timers, retries, deadlines and (rdma_cm) connection events. Cheap when idle.
  virtual void tick(Clock::time_point now) = 0;
  virtual void forget(int peer) = 0;  // the peer failed: stop working on it
  // A failed peer's RC QP, everything posted on it flushed back, is destroyed. (rdma_cm keeps
  // its id and QP until the end: events may still name them.)
  virtual void release(int peer) { (void)peer; }
  virtual Stats stats() const = 0;

 protected:
  const EndpointAddress& address_of(int peer) const { return addresses_[size_t(peer)]; }
  bool have_addresses() const { return !addresses_.empty(); }

  ConnectionSetup setup_;
  Listener& listener_;
  std::unordered_map<uint32_t, int> peer_by_qp_;

 private:
  std::vector<EndpointAddress> addresses_;
};

}  // namespace ibcoll::transport::verbs
