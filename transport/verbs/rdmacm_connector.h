// RdmaCmConnector: on-demand RC connections through librdmacm (IBCOLL_CM=rdmacm), for
// deployments that address peers by IP. Each process listens on its device's IP address (the
// IPv4 embedded in an IPv4-mapped RoCE GID, else the GID as IPv6) and publishes the port.
// Connecting: resolve address → resolve route → rdma_create_qp on the shared CQ and SRQ →
// rdma_connect with ConnectData (rank, credits, incarnation) as private data; the peer accepts
// with its own. When both sides connect at once, the lower rank's connection wins: it rejects
// the higher rank's request, and the higher rank accepts the lower's and drops its own attempt.
// Events are read from a non-blocking channel in tick(); a peer that disconnects fails.
#pragma once

#include <rdma/rdma_cma.h>

#include <unordered_map>
#include <vector>

#include "transport/peer_map.h"
#include "transport/verbs/connection_manager.h"
#include "transport/verbs/options.h"
#include "transport/wire.h"

namespace ibcoll::transport::verbs {

class RdmaCmConnector final : public ConnectionManager {
 public:
  RdmaCmConnector(const ConnectionSetup& setup, Listener& listener);
  ~RdmaCmConnector() override;
  RdmaCmConnector(const RdmaCmConnector&) = delete;
  RdmaCmConnector& operator=(const RdmaCmConnector&) = delete;

  EndpointAddress local_address() const override;
  void connect(int peer) override;
  SendPath send_path(int peer) const override;
  uint32_t granted_credits(int peer) const override;
  bool on_completion(const ibv_wc&) override { return false; }
  void on_rc_message(int) override {}
  void tick(Clock::time_point now) override;
  void forget(int peer) override;
  Stats stats() const override { return stats_; }

 private:
  enum class State { idle, connecting, ready, failed };
  struct Link {
    State state = State::idle;
    rdma_cm_id* id = nullptr;       // the connection in use (ours or the accepted one)
    rdma_cm_id* attempt = nullptr;  // our own connect, until it wins or is dropped
    QueueCaps caps;
    uint32_t granted_credits = 0;
    Clock::time_point started{};
    bool said_slow = false;  // the log said once that it takes longer than IBCOLL_TIMEOUT
  };

  void handle(rdma_cm_event& event, std::vector<rdma_cm_id*>& retire);
  void on_connect_request(rdma_cm_event& event, std::vector<rdma_cm_id*>& retire);
  void create_queue_pair(rdma_cm_id* id, int peer, QueueCaps& caps);
  // Points at hello_, with the credits we grant `peer`: valid until the next call.
  rdma_conn_param connect_param(int peer);
  void fail(int peer, const std::string& why);
  void destroy(rdma_cm_id* id);
  Link& link(int peer) { return links_[peer]; }

  wire::ConnectData hello_;  // our private data
  rdma_event_channel* events_ = nullptr;
  rdma_cm_id* listen_id_ = nullptr;
  EndpointAddress address_;
  PeerMap<Link> links_;  // the peers connected or being connected to
  Stats stats_;
};

}  // namespace ibcoll::transport::verbs
