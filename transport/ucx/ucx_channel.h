// UcxChannel: the Channel over UCX's UCP, for where ibcoll's own verbs path has no device it can
// use (docs/architecture.md, "A UCX channel"). One worker, polled by poll(); endpoints made at a
// peer's first message, with UCP_ERR_HANDLING_MODE_PEER. Every message is an active message
// whose header (UcxHeader) carries ibcoll's tag and the sender's rank, matched here by a
// MatchTable as over verbs (a 64-bit ibcoll tag leaves no room for the peer in a UCP tag):
//  - eager messages (≤ eager_limit) are copied into a bounce buffer and sent at once, so a
//    withdrawn send never touches its buffer again;
//  - larger ones ask first (request), and only once the receiver answers with its receive's id
//    does the data go, by UCX's own rendezvous into the receiver's buffer (UCX 1.13 cannot
//    withdraw a posted send, so nothing of a send is exposed before a receive is there);
//  - cancel(): what was not posted is forgotten, a request not yet answered is withdrawn
//    (send_withdrawn), a receive that answered tells its sender (receive_withdrawn) and refuses
//    its data; data already moving is waited for, up to the liveness limit, then its endpoint
//    is closed by force and the peer fails;
//  - a peer's endpoint error fails exactly the operations that depend on that peer.
// Callbacks run only inside ucp_worker_progress and only record; completions run from poll().
#pragma once

#include <ucp/api/ucp.h>

#include <cstdint>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/deadline.h"
#include "transport/channel.h"
#include "transport/deferred_completions.h"
#include "transport/match_table.h"
#include "transport/message_pool.h"
#include "transport/peer_map.h"
#include "transport/pooled_bytes.h"
#include "transport/posted_recv.h"
#include "transport/ucx/options.h"
#include "transport/ucx/ucx_handles.h"
#include "transport/ucx/ucx_header.h"
#include "transport/withdrawn_tags.h"

namespace ibcoll::transport::ucx {

struct Counters {
  uint64_t endpoints = 0;  // endpoints made
  uint64_t messages_sent = 0, bytes_sent = 0;
  uint64_t messages_received = 0, bytes_received = 0;
  uint64_t rendezvous_sent = 0;
  uint64_t failed_peers = 0;
};

class UcxChannel final : public Channel {
 public:
  UcxChannel(int rank, int size, const Options& options);
  ~UcxChannel() override;

  // Exchange these (the worker's address) through the bootstrap, then hand every rank's to
  // set_peer_addresses().
  std::string local_address() const { return worker_.address(); }
  void set_peer_addresses(std::vector<std::string> addresses);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t max_message_size() const override { return ~size_t{0} >> 1; }
  void cancel(uint64_t first, uint64_t last) override;
  bool unaided(int, size_t bytes) const override { return bytes <= options_.eager_limit; }
  const Status* peer_failure(int peer) const override {
    const Peer* p = peers_.find(peer);
    return p && p->failed ? &p->failure : nullptr;
  }
  void tell(int peer, const Notice& notice) override;
  void tell_peers(const Notice& notice) override;
  // Control messages (notices among them) that UCX has not completed.
  bool notices_pending() const override { return !controls_.empty(); }
  // Its operations fail and its endpoint closes by force: a peer wrongly taken for dead learns
  // at once that it is out (its word about the others is not heeded: RoutedChannel).
  void peer_gone_elsewhere(int peer, const Status& why) override { fail_peer(peer, why, false); }
  int poll() override;
  int arm_event_fd() override;

  Counters counters() const { return counters_; }

 private:
  void post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                 Completion done) override;
  void post_recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) override;

  // A UCX request of ours in flight, or done and not yet seen by finish_requests().
  struct InFlight {
    enum class Of : uint8_t { send, rendezvous_recv, control } of;
    UcxChannel* channel;
    uint32_t id;
    ucs_status_t status = UCS_OK;  // UCX's, once done
    size_t bytes = 0;              // a data receive's length, once done
    void* request = nullptr;       // UCX's, once done: freed by finish_requests
  };
  struct SendOp {
    int peer;
    uint64_t tag;
    const std::byte* data;
    size_t length;
    Completion done;
    UcxHeader header{};       // lives while UCX sends it (1.13 cannot copy it)
    UcxHeader data_header{};  // rendezvous: the data's, once answered
    PooledBytes bounce;       // eager: the payload's copy
    InFlight in_flight{};
    void* request = nullptr;   // the UCX request now in flight (the eager message or the data)
    bool asked = false;        // rendezvous: its request went, no answer yet
    bool answered = false;     // rendezvous: answered, its data not yet posted
    bool data_posted = false;  // rendezvous: its data is UCX's (the request in flight, if any)
    bool withdrawn = false;    // ends unseen once UCX is done with it
    Status cut{};              // how it ends once UCX is done with it (receiver withdrew, failed)
  };
  struct Arrival {
    UcxHeader::Type type;
    PooledBytes payload;     // eager
    uint32_t send_id = 0;    // request
    uint64_t length = 0;     // request: the bytes offered
    bool withdrawn = false;  // request: its sender gave it up
  };
  struct RendezvousRecv {
    int peer;
    uint64_t tag;
    std::byte* buffer;
    size_t capacity;
    uint64_t offered;
    uint32_t send_id;  // the sender's, from its request
    Completion done;
    InFlight in_flight{};
    void* request = nullptr;  // the data's receive, once started
    bool withdrawn = false;
    Status cut{};  // how it ends once UCX is done with it (the peer failed)
  };
  struct Peer {
    UcxChannel* channel = nullptr;  // for UCX's error handler, whose argument this entry is
    int rank = -1;
    ucp_ep_h endpoint = nullptr;
    uint32_t next_sequence_out = 0, next_sequence_in = 0;
    bool failed = false;
    bool gone = false;       // failed by UCX (not by us): the observer hears of it
    bool heard = false;      // a message came since the last liveness check
    bool waited_on = false;  // the liveness check's mark: an operation waits for the peer
    bool busy = false;       // and another: a UCX request of ours with the peer is in flight
    bool sent = false;       // a message went to the peer since the last liveness check
    Clock::time_point last_heard{}, last_probe{}, last_sent{};
    // The flush after the last probe: done once the peer's side of the connection acknowledged
    // it (rc: its adapter's ack; no process needs to answer, so a peer that computes is not
    // taken for dead). Not done within four keepalive intervals (eight while our own traffic
    // with the peer may hold it up): the peer failed.
    void* flush = nullptr;
    Status failure;
  };

  static ucs_status_t on_message(void* arg, const void* header, size_t header_length, void* data,
                                 size_t length, const ucp_am_recv_param_t* param);
  static void on_endpoint_error(void* arg, ucp_ep_h endpoint, ucs_status_t status);
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_data_received(void* request, ucs_status_t status, size_t length, void* user_data);

  ucs_status_t receive(const UcxHeader& header, void* data, size_t length,
                       const ucp_am_recv_param_t& param);
  void on_eager(int peer, const UcxHeader& header, const void* data, size_t length);
  void on_request(int peer, const UcxHeader& header);
  void on_answer(int peer, const UcxHeader& header);
  ucs_status_t on_data(int peer, const UcxHeader& header, void* data, size_t length,
                       const ucp_am_recv_param_t& param);
  void on_send_withdrawn(int peer, uint32_t send_id);
  void on_receive_withdrawn(int peer, uint32_t send_id);
  // The data of a send its receiver answered (op.header names the receive now).
  void post_data(SendOp& op);

  void start_rendezvous_recv(int peer, uint64_t tag, PostedRecv recv, uint32_t send_id,
                             uint64_t offered);
  // Posts an active message with `header` (which lives until `in_flight` is done) on `peer`'s
  // endpoint; returns UCX's request (null: done already) or fails the peer and returns an error
  // pointer.
  void* send_message(int peer, const UcxHeader& header, InFlight& in_flight, const void* payload,
                     size_t length, bool rendezvous);
  void send_control(int peer, UcxHeader::Type type, uint64_t tag, uint32_t id, uint64_t length,
                    uint32_t reply_id = 0);
  // UCX's requests that completed since the last call, handled.
  void finish_requests();
  void end_send(uint32_t id, const Status& status);
  void end_rendezvous_recv(uint32_t id, const Status& status, size_t bytes);
  // Waits (progressing the worker) until no request of the ops `pending` names is in flight, up
  // to the liveness limit; then fails their peers, whose endpoints close by force.
  void wait_out(const std::vector<std::pair<InFlight::Of, uint32_t>>& pending);
  bool in_flight(InFlight::Of of, uint32_t id) const;
  void close_endpoint(Peer& peer, bool force);

  Peer& peer_entry(int peer);
  ucp_ep_h endpoint(int peer);
  void fail_peer(int peer, const Status& status, bool gone);
  void fail_peers_reported();
  // A peer that an operation waits on and that has said nothing for a keepalive interval gets a
  // probe and a flush (UCX's own keepalive does not reach an endpoint that only receives):
  // over a dead peer's connection the send fails (tcp at once), or the flush is still not done
  // four intervals later (rc, whose own retries take tens of seconds under emulation), and the
  // peer fails, as verbs judges a silent peer.
  void check_liveness(Clock::time_point now);
  uint32_t new_id() { return next_id_ == 0 ? ++next_id_ : next_id_++; }

  Options options_;
  int rank_, size_;
  std::vector<std::string> addresses_;  // by rank: each worker's
  std::pmr::unsynchronized_pool_resource records_{kMessagePool};
  MessagePool payloads_;
  std::pmr::unordered_map<uint32_t, SendOp> sends_{&records_};
  std::pmr::unordered_map<uint32_t, RendezvousRecv> rendezvous_{&records_};
  // Control messages in flight: their headers, until UCX is done with them.
  struct ControlSend {
    UcxHeader header;
    InFlight in_flight;
  };
  std::pmr::unordered_map<uint32_t, ControlSend> controls_{&records_};
  MatchTable<PostedRecv, Arrival> matches_;
  WithdrawnTags withdrawn_tags_;
  PeerMap<Peer> peers_;
  std::vector<InFlight*> finished_;   // requests UCX completed, from its callbacks
  std::vector<InFlight*> finishing_;  // finish_requests' batch
  std::vector<std::pair<int, Status>> reported_failures_;  // endpoint errors, from callbacks
  struct Heard {
    int teller;
    Notice notice;
  };
  std::vector<Heard> heard_;    // notices, from callbacks
  std::vector<void*> closing_;  // endpoints' close requests, freed once done
  DeferredCompletions completions_;
  uint32_t next_id_ = 1;
  bool closing_down_ = false;  // the destructor runs
  uint32_t polls_since_clock_ = 0;
  Clock::time_point next_liveness_check_{};
  std::vector<int> probed_;  // check_liveness's list
  Counters counters_;
  // Last: the worker goes first, while the records its callbacks may still name exist.
  UcpContext context_;
  UcpWorker worker_;
};

}  // namespace ibcoll::transport::ucx
