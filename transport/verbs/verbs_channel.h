// VerbsChannel: the Channel over verbs. One CQ, one SRQ for every peer (an XRC SRQ where the
// node has an XRC domain), connections made on demand (a ConnectionManager: an RC QP per peer,
// or an XRC INI QP per remote node), and for each peer:
//  - eager messages (≤ eager_limit) copied into the peer's SRQ buffers, in parts of one
//    buffer (eager_buffer) each, sent back to back and put together on arrival;
//  - rendezvous for larger ones: request → the receiver registers its buffer and answers →
//    RDMA write with immediate straight into it;
//  - credits: the SRQ's buffers are lent to the connected peers (a CreditLedger); a peer sends
//    only with a credit, and we return credits as we consume its messages (piggybacked, or in
//    a credit message), so a many-to-one burst never exhausts the SRQ;
//  - failures: an error completion, a fatal async event or an rdma_cm connection error fails
//    every operation that depends on that peer, with the verbs status in the message;
//  - cancel(): a send not begun is forgotten; one under way tells the receiver
//    (send_withdrawn), whose receive fails; an RDMA write from it that is posted is waited for.
//    A rendezvous receive that has answered deregisters its buffer at once (a late write then
//    fails on the wire, never lands) and tells the sender (receive_withdrawn); one not yet
//    answered answers with a refusal.
// Completions run from poll(); nothing runs inside send()/recv().
#pragma once

#include <cstdint>
#include <memory>
#include <memory_resource>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/fifo.h"
#include "transport/channel.h"
#include "transport/deferred_completions.h"
#include "transport/match_table.h"
#include "transport/message_pool.h"
#include "transport/peer_map.h"
#include "transport/pooled_bytes.h"
#include "transport/posted_recv.h"
#include "transport/verbs/completion_queue.h"
#include "transport/verbs/connection_manager.h"
#include "transport/verbs/credit_ledger.h"
#include "transport/verbs/device.h"
#include "transport/verbs/handles.h"
#include "transport/verbs/mr_cache.h"
#include "transport/verbs/options.h"
#include "transport/verbs/receive_queue.h"
#include "transport/verbs/xrc_domain.h"
#include "transport/wire.h"
#include "transport/withdrawn_tags.h"

namespace ibcoll::transport::verbs {

struct ChannelCounters {
  uint64_t connections = 0;  // RC connections made
  uint64_t shared_receive_queues = 0;
  uint64_t posted_receives = 0;  // SRQ buffers posted now
  uint64_t srq_depth = 0;
  uint64_t messages_sent = 0, messages_received = 0;
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint64_t rendezvous_sent = 0;
  uint64_t credit_stalls = 0;    // times a send waited for credits
  uint64_t credit_messages = 0;  // explicit credit returns sent
  uint64_t credit_recalls = 0;   // peers asked to give back unused credits (CreditLedger)
  // Credits sent while fewer SRQ buffers were posted than credits were out (lent, and not owed
  // back here): a credited message could have found the queue empty. Never, by construction.
  uint64_t credit_overdrafts = 0;
  uint64_t keepalives_sent = 0;
  uint64_t handshake_retries = 0;
  uint64_t srq_limit_events = 0;
  uint64_t failed_peers = 0;
  uint64_t released_connections = 0;   // failed peers' RC queues given up once flushed back
  uint64_t rdma_writes_in_flight = 0;  // chunks posted and not yet complete
  uint64_t registration_hits = 0, registration_misses = 0;
  uint64_t registrations_unmapped = 0;  // dropped: their memory was unmapped (UnmapWatch)
  uint64_t early_arrivals = 0;          // messages waiting for their receive now
  uint64_t early_arrival_bytes = 0;     // the heap memory their pool holds now
};

class VerbsChannel final : public Channel, private ConnectionManager::Listener {
 public:
  // Rendezvous writes: the largest chunk (one work request, credit and completion each), and
  // the most chunks of one send in flight. At ~12 GB/s a chunk takes under 100 µs; on a link of
  // a few MB/s still well under a second.
  static constexpr size_t kWriteChunkBytes = 1 << 20;
  static constexpr uint32_t kWritesInFlight = 4;

  VerbsChannel(int rank, int size, const Options& options);
  ~VerbsChannel() override;

  // One SRQ buffer or eager send slot under `options`, and all of them a channel registers:
  // the same whatever the job's size.
  static size_t slot_bytes(const Options& options);
  static size_t buffer_bytes(const Options& options);
  // The SRQ buffers lent to the connected peers as credits (CreditLedger's capacity).
  static uint32_t lent_credits(const Options& options);

  // Exchange these through the bootstrap, then hand every rank's to set_peer_addresses().
  EndpointAddress local_address() const;
  void set_peer_addresses(std::vector<EndpointAddress> addresses);

  // Starts connecting to `peer` now rather than at its first message (nothing if connected,
  // connecting, or the device has failed).
  void connect(int peer);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t max_message_size() const override;
  void cancel(uint64_t first, uint64_t last) override;
  // Eager (copied into the receiver's SRQ buffers), not a rendezvous's RDMA write.
  bool unaided(int, size_t bytes) const override { return bytes <= options_.eager_limit; }
  const Status* peer_failure(int peer) const override {
    if (const Peer* p = peers_.find(peer)) return p->failed ? &p->failure : nullptr;
    return device_failure_.ok() || peer == rank_ ? nullptr : &device_failure_;
  }
  void tell(int peer, const Notice& notice) override;
  void tell_peers(const Notice& notice) override;
  // The job holds it gone: waiting on this rank's own keepalives would hold the calls on it
  // for seconds more. Its RC QP goes into the error state, as for a peer seen dead here.
  // A rank it never dealt with needs nothing.
  void peer_gone_elsewhere(int peer, const Status& why) override {
    if (peers_.find(peer)) fail_peer(peer, why);
  }
  bool notices_pending() const override;
  int poll() override;
  int arm_event_fd() override { return cq_->arm(); }

  ChannelCounters counters() const;
  const Device& device() const { return *device_; }
  // Whether rendezvous buffers stay registered after their transfer (IBCOLL_MR_CACHE).
  bool registrations_cached() const { return registrations_->enabled(); }

 private:
  void post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                 Completion done) override;
  void post_recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) override;
  static constexpr size_t kHeaderBytes = sizeof(wire::MessageHeader);
  static constexpr uint32_t kSendSlots = 256;   // registered eager send buffers
  static constexpr uint32_t kSignalEvery = 16;  // one send in this many asks for a completion
  // In an RDMA write's work id, beside the send id: the write's last chunk.
  static constexpr uint64_t kLastChunk = uint64_t{1} << 40;

  struct SendOp {
    int peer;
    uint64_t tag;
    const std::byte* data;
    size_t length;
    Completion done;
    RegistrationCache::Entry* registration = nullptr;
    wire::ReadyToReceive target{};  // from the receiver's answer (rendezvous)
    size_t sent = 0;                // eager: bytes posted so far
    bool request_posted = false;    // rendezvous: the receiver has (or will have) the request
    // Rendezvous: its RDMA writes, a chunk each (a write with immediate, which takes a credit).
    uint32_t chunks = 0;            // in all, once the first is posted
    uint32_t chunks_posted = 0;     // so far
    uint32_t chunks_in_flight = 0;  // posted and not yet complete: the device reads the buffer
    Status cut{};  // the receiver withdrew: no more chunks, and it ends so once none is in flight
  };
  using Sends = std::pmr::unordered_map<uint32_t, SendOp>;
  struct Arrival {
    wire::Type type;
    PooledBytes payload;     // eager
    uint32_t send_id = 0;    // rts
    uint64_t length = 0;     // rts
    bool withdrawn = false;  // rts: its sender gave it up; a receive taking it fails
  };
  struct RendezvousRecv {
    int peer;
    uint64_t tag;
    std::byte* buffer;
    size_t length;
    uint64_t offered;  // bytes the sender has
    uint32_t send_id;
    Completion done;
    RegistrationCache::Entry* registration = nullptr;
    // Answer with a refusal (the receive has ended already): registration failed, or the
    // receive was withdrawn before its answer went out.
    bool refused = false;
    wire::Refusal refusal = wire::Refusal::unregistrable;
    bool answered = false;  // the sender has our address and key
    size_t received = 0;    // bytes its RDMA writes (with immediate) have brought so far
  };
  // An eager message arriving in parts from one peer: into the receive it matched, or, if none
  // was posted, into `held` (it becomes an unexpected arrival once whole). A receive cancelled
  // meanwhile leaves neither: the rest of the parts is dropped.
  struct Assembly {
    uint64_t tag;
    size_t total, received;
    std::optional<PostedRecv> posted;
    PooledBytes held;
    bool dropped = false;
  };
  // What waits in a peer's send queue, in order. Credit and ready messages (and keepalives,
  // which are no messages) are not queued: they carry no order and must pass a queue stalled on
  // credits.
  struct Outgoing {
    enum class Step : uint8_t {
      eager,               // SendOp: its payload, copied, in parts of one buffer
      rendezvous_request,  // SendOp: asks the receiver for a buffer
      rendezvous_reply,    // RendezvousRecv: tells the sender where to write (or refuses)
      rdma_write,          // SendOp: the data, into the buffer the receiver named
    };
    Step step;
    uint32_t id;
  };
  // A work request posted on a peer's QP and not yet known complete. Most sends go
  // unsignaled; a signaled completion retires every entry up to its own, in posting order.
  struct Unacked {
    uint64_t work_id;
    bool signaled;
  };
  // News the peer must hear (send_withdrawn, receive_withdrawn, a Notice), not yet posted.
  struct News {
    wire::Type type;
    uint64_t tag;     // a notice's subject
    uint64_t length;  // the send id; a notice's kind and detail (Notice::packed)
  };
  // A QP this process sends on, with what is posted on it: completions come in posting order
  // per QP, so this is where sends retire. RC: one peer's QP. XRC: the INI QP of a remote node,
  // shared by the peers there.
  struct SendQueue {
    ibv_qp* qp = nullptr;
    QueueCaps caps;
    Fifo<Unacked> unacked;
    uint32_t unsignaled_run = 0;  // sends since the last signaled one
    uint32_t in_flight = 0;       // work requests on the QP
    uint32_t max_send_wr = 0;
    std::vector<int> peers;  // the connected peers whose sends go on it
  };
  struct Peer {
    Fifo<Outgoing> outgoing;
    SendQueue* queue = nullptr;   // once connected
    uint32_t remote_srq_num = 0;  // XRC: named in each send
    uint32_t send_credits = 0;
    uint32_t credits_to_return = 0;
    uint32_t credits_to_recall = 0;  // to ask back from the peer (a credit_recall to send)
    uint32_t credits_to_give_back = 0;
    bool give_back_due = false;  // the peer recalled: answer, even with none unused
    uint32_t open_ops = 0;       // our sends and receives that depend on the peer
    bool connected = false, announce = false, keepalive = false, failed = false;
    bool probe_outstanding = false;  // a keepalive not yet acknowledged
    std::optional<Assembly> assembly;
    Fifo<News> news;
    Status failure;
    Clock::time_point last_heard{}, last_keepalive{}, probe_sent{}, failed_at{};
  };
  // ConnectionManager::Listener
  void on_connected(int peer, bool announce) override;
  void on_connect_failed(int peer, const Status& status) override { fail_peer(peer, status); }
  void on_peer_gone(int peer, const Status& status) override { fail_peer(peer, status, true); }
  uint32_t credits_for(int peer) override;
  // What the ledger decided for other peers than the one at hand: grants and recalls to send.
  void tell_credit_notices();
  // The RC connections of failed peers whose posted work has all flushed back go (their
  // SendQueue and QP): a failed peer's is listed in failed_queues_ until then.
  void release_flushed_queues();
  void credit_came_home(int peer);
  // Credits are about to leave: counts an overdraft (see ChannelCounters).
  void check_credits_backed();

  void ensure_connected(int peer);
  void handle(const ibv_wc& wc);
  void on_receive(const ibv_wc& wc);
  void on_message(int peer, const std::byte* bytes, size_t size);
  void on_send_done(const ibv_wc& wc);
  void on_probe_done(const ibv_wc& wc);
  // A send or probe to `peer` completed: on success the peer lives (acknowledged), else its
  // queue fails.
  void on_acknowledged(const ibv_wc& wc, int peer, const char* what, bool probe);
  void acknowledged(int peer, bool probe);
  void on_write_done(const ibv_wc& wc);
  void on_async_event();
  void on_tick(Clock::time_point now);
  void deliver_eager(int peer, PostedRecv& recv, const std::byte* payload, size_t length);
  void start_assembly(int peer, uint64_t tag, size_t total);
  void add_part(int peer, const std::byte* part, size_t length);
  void start_rendezvous_recv(int peer, PostedRecv recv, uint64_t tag, uint32_t send_id,
                             uint64_t offered);
  // Answers a rendezvous request for a withdrawn receive with a refusal.
  void refuse_withdrawn(int peer, uint64_t tag, uint32_t send_id);
  // cancel(), one half each.
  void withdraw_receives(uint64_t first, uint64_t last);
  void withdraw_sends(uint64_t first, uint64_t last);
  void on_send_withdrawn(int peer, uint64_t tag, uint32_t send_id);
  void on_receive_withdrawn(int peer, uint32_t send_id);

  void pump(int peer);
  // Work on `queue` completed: room on it for `peer`, and for the peers sharing it (XRC).
  void pump_sharing(SendQueue& queue, int peer);
  bool post_outgoing(int peer, const Outgoing& item);
  bool post_rdma_write(int peer, uint32_t id);
  // One chunk of the write: none (no credits or room, or the peer failed), more to come, or
  // the last (or none needed: the send ended or was withdrawn).
  enum class Chunk { none, more, last };
  Chunk post_write_chunk(int peer, uint32_t id);
  bool post_eager_part(int peer, uint64_t tag, const std::byte* data, size_t length,
                       size_t& offset);
  bool post_eager_parts(int peer, Sends::iterator send);
  bool post_control(int peer, wire::Type type, uint64_t length = 0);
  bool post_probe(int peer);
  // Posts `wr` on `peer`'s queue; where the device refuses it, fails the peer naming `what`.
  bool post_on(SendQueue& queue, int peer, ibv_send_wr& wr, const char* what);
  bool post_message(int peer, const wire::MessageHeader& header, const void* body, size_t body_size,
                    const void* payload, size_t payload_size);
  bool has_room(int peer, uint32_t wrs) const;
  bool should_signal(SendQueue& queue);
  void retire_through(SendQueue& queue, uint64_t work_id);
  // `gone`: the peer stopped answering the transport itself (keepalives, retries), so its
  // process or node is likely dead: the observer hears of it.
  void fail_peer(int peer, const Status& status, bool gone = false);
  // The QP is in error (an error completion or event): every peer sending on it fails, `peer`
  // (the one it was seen on) with `status`, the others because they share the QP.
  void fail_queue(SendQueue& queue, int peer, const Status& status, bool gone);
  // XRC: a failed peer's writes still posted on the INI its node's other peers keep running,
  // not complete after the keepalive's limit, fail that INI, so that they flush back.
  void fail_stuck_initiators(Clock::time_point now);
  // The device is dead: no write will complete or flush, and none reads memory any more.
  void end_every_send(const Status& status);
  // Deregisters its buffer (no write of it is in flight) and completes it (unless withdrawn
  // here) with `status` and `bytes`, or with the receiver's withdrawal if that came.
  void end_send(Sends::iterator send, const Status& status, size_t bytes);
  // The peers with state, listed into `into` first: visiting one may fail it, or make state for
  // another.
  void known_peers(std::vector<int>& into) const;
  // The peer's state for a new send or receive; failed already if the device is.
  Peer& peer_for_new_operation(int peer);
  uint32_t new_id();
  Status completion_error(const ibv_wc& wc, int peer, const char* what) const;

  Options options_;
  int rank_, size_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<XrcDomain> xrc_;
  ProtectionDomain pd_;
  std::unique_ptr<CompletionQueue> cq_;
  std::unique_ptr<SharedReceiveQueue> srq_;
  std::unique_ptr<std::byte[]> send_slab_;
  MemoryRegion send_mr_;
  std::unique_ptr<RegistrationCache> registrations_;
  std::unique_ptr<ConnectionManager> connector_;  // owns the QPs: destroyed first

  size_t slot_size_;
  std::vector<int> slots_;  // by send slot: the peer its message went to
  std::vector<uint32_t> free_slots_;
  // Work requests allowed in flight, signaled or not (an error flushes them all into the CQ):
  // the CQ can never overflow.
  uint32_t cq_budget_ = 0;
  uint32_t cq_in_flight_ = 0;
  uint32_t unsignaled_ = 0;  // unsignaled sends holding send slots, over all peers
  CreditLedger credits_;
  // While a poll handles its completions, no credit leaves: the buffers they consumed are
  // posted again first. Peers whose credited messages it consumed (one entry each: their
  // credits come home after the refill), and peers owed credits meanwhile (pumped after it).
  bool holding_credits_ = false;
  std::vector<int> credits_home_, owed_while_holding_;
  uint32_t credits_owed_ = 0;  // the peers' credits_to_return, in all
  // Every message has a record here while it is under way, and an eager one that arrives before
  // its receive its payload in early_arrivals_; the pools keep the freed blocks for the next
  // messages (a node per send, a vector per early arrival, from the heap were the message
  // path's last allocations). Declared before the peers and queues that hold them.
  std::pmr::unsynchronized_pool_resource message_records_{kMessagePool};
  MessagePool early_arrivals_;
  WithdrawnTags withdrawn_tags_;  // what arrives for these is dropped
  PeerMap<Peer> peers_;           // the peers dealt with, never every rank of the job
  std::unordered_map<uint32_t, SendQueue> queues_;  // by QP number: one per connected peer or node
  std::vector<int> failed_queues_;   // failed peers whose RC QP waits for its work to flush back
  std::vector<int> peers_to_visit_;  // on_tick's list (a visit may fail a peer)
  std::vector<int> sharing_;         // pump_sharing's list (a pump may fail a peer)
  std::vector<int> starved_peers_;   // poll's list when a starved send may go
  Status device_failure_;            // the port or device died: every peer, known or not
  Sends sends_{&message_records_};
  std::pmr::unordered_map<uint32_t, RendezvousRecv> rendezvous_{&message_records_};
  MatchTable<PostedRecv, Arrival> matches_;
  DeferredCompletions completions_;
  bool starved_ = false;  // a send waited for a slot or CQ room shared by all peers
  uint32_t next_id_ = 1;
  uint32_t polls_since_tick_ = 0;
  Clock::time_point now_ = Clock::now();  // as of the last clock read: liveness needs no more
  Clock::time_point next_tick_{};
  ChannelCounters counters_;
  uint64_t posted_ = 0;  // work requests posted, for Options::error_qp_after
};

}  // namespace ibcoll::transport::verbs
