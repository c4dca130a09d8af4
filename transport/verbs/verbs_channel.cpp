#include "transport/verbs/verbs_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <utility>

#include "base/log.h"
#include "transport/verbs/rdmacm_connector.h"
#include "transport/verbs/ud_connector.h"
#include "transport/verbs/work_id.h"

namespace ibcoll::transport::verbs {
namespace {

constexpr uint32_t kSendDepthPerQp = 128;   // an RC QP's, or an XRC INI's for a remote node
constexpr uint32_t kDatagramWork = 2 * 64;  // UD receives and sends in the CQ
constexpr uint32_t kQkey = 0x1bc0c011;
constexpr int kPollBatch = 32;
constexpr auto kTickInterval = std::chrono::milliseconds(1);
// While peers wait for credits and none is free, a peer that sent nothing for this long gives
// back what it holds (CreditLedger::recall_idle).
constexpr auto kCreditIdle = std::chrono::milliseconds(20);
constexpr uint32_t kPollsPerClockRead = 64;

}  // namespace

// A quarter of the SRQ stays for the messages that need no credit (credit returns, notices).
uint32_t VerbsChannel::lent_credits(const Options& options) {
  return options.srq_depth * 3 / 4;
}

VerbsChannel::VerbsChannel(int rank, int size, const Options& options)
    : options_(options),
      rank_(rank),
      size_(size),
      credits_(lent_credits(options), options.credits) {
  credits_home_.reserve(kPollBatch);  // a completion adds one at most
  owed_while_holding_.reserve(kPollBatch);
  if (size < 1)
    throw Error(Code::invalid_argument, "size: must be at least 1, got " + std::to_string(size));
  if (rank < 0 || rank >= size) {
    throw Error(Code::invalid_argument,
                "rank: " + std::to_string(rank) + " is outside [0, " + std::to_string(size) + ")");
  }
  if (options.srq_depth < 2) {
    throw Error(Code::invalid_argument, "IBCOLL_SRQ_DEPTH: must be at least 2");
  }
  if (options.credits < 1) throw Error(Code::invalid_argument, "IBCOLL_CREDITS: must be >= 1");
  device_ = std::make_unique<Device>(options.device, options.gid_index,
                                     options.connect == ConnectMode::rdmacm);
  if (options.connect == ConnectMode::rdmacm && options.xrc != XrcMode::off) {
    if (options.xrc == XrcMode::on) {
      throw Error(Code::not_supported,
                  "IBCOLL_XRC=on: XRC connections are made by the UD handshake, not by rdma_cm "
                  "(IBCOLL_CM=rdmacm); use IBCOLL_CM=ud or IBCOLL_XRC=auto");
    }
    IBCOLL_LOG(info, "IBCOLL_CM=rdmacm makes RC connections: XRC is not used");
  } else {
    xrc_ = open_xrc_domain(*device_, options.xrc, options.xrc_domain_file);
    if (xrc_) {
      IBCOLL_LOG(info, device_->name() << ": XRC, one INI QP per remote node and one XRC SRQ");
    }
  }
  ibv_context* context = device_->context();
  pd_ = allocate_pd(context);

  slot_size_ = slot_bytes(options);
  cq_budget_ = kSendSlots + 64;
  cq_ = std::make_unique<CompletionQueue>(
      context, static_cast<int>(options.srq_depth + kDatagramWork + cq_budget_),
      options.event_channel);
  srq_ = std::make_unique<SharedReceiveQueue>(context, pd_.get(), options.srq_depth, slot_size_,
                                              xrc_ ? xrc_->get() : nullptr,
                                              xrc_ ? cq_->get() : nullptr);
  send_slab_.reset(new std::byte[size_t{kSendSlots} * slot_size_]);
  send_mr_ = register_memory(pd_.get(), send_slab_.get(), size_t{kSendSlots} * slot_size_,
                             Access::device_reads);
  slots_.resize(kSendSlots);
  for (uint32_t i = kSendSlots; i > 0; --i)
    free_slots_.push_back(i - 1);
  registrations_ =
      std::make_unique<RegistrationCache>(pd_.get(), options.mr_cache, options.mr_cache_bytes);
  if (registrations_->enabled() && !registrations_->trusted()) {
    IBCOLL_LOG(warn, "registration cache " << RegistrationCache::describe(options.mr_cache));
  } else {
    IBCOLL_LOG(info, "registration cache " << RegistrationCache::describe(options.mr_cache));
  }

  std::random_device random;
  const uint64_t incarnation = (uint64_t{random()} << 32) | random();
  const ConnectionSetup setup{.device = *device_,
                              .pd = pd_.get(),
                              .cq = cq_->get(),
                              .srq = srq_->get(),
                              .xrcd = xrc_ ? xrc_->get() : nullptr,
                              .srq_num = xrc_ ? srq_->srq_num() : 0,
                              .options = options,
                              .rank = rank,
                              .size = size,
                              .send_depth = kSendDepthPerQp,
                              .incarnation = incarnation};
  auto& listener = static_cast<Listener&>(*this);
  if (options.connect == ConnectMode::rdmacm) {
    connector_ = std::make_unique<RdmaCmConnector>(setup, listener);
  } else {
    connector_ = std::make_unique<UdConnector>(setup, kQkey, listener);
  }
  int flags = fcntl(context->async_fd, F_GETFL);
  fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK);
}

size_t VerbsChannel::slot_bytes(const Options& options) {
  return (kHeaderBytes + std::max(options.eager_buffer, sizeof(wire::ReadyToReceive)) + 63) / 64 *
         64;
}

size_t VerbsChannel::buffer_bytes(const Options& options) {
  return (size_t{options.srq_depth} + kSendSlots) * slot_bytes(options);
}

VerbsChannel::~VerbsChannel() {
  if (!sends_.empty() || !rendezvous_.empty()) {
    IBCOLL_LOG(warn, "verbs channel closed with " << sends_.size() + rendezvous_.size()
                                                  << " operations still in flight");
  }
}

EndpointAddress VerbsChannel::local_address() const {
  return connector_->local_address();
}

void VerbsChannel::set_peer_addresses(std::vector<EndpointAddress> addresses) {
  connector_->set_peer_addresses(std::move(addresses));
  if (xrc_) xrc_->unlink_file();  // every process has opened the domain: the name can go
}

size_t VerbsChannel::max_message_size() const {
  return size_t{1} << 32;
}

uint32_t VerbsChannel::new_id() {
  if (next_id_ == 0) ++next_id_;  // 0 means "no operation"
  return next_id_++;
}

void VerbsChannel::ensure_connected(int peer) {
  connector_->connect(peer);
}

void VerbsChannel::connect(int peer) {
  check_peer(peer, "connect");
  if (peer_for_new_operation(peer).failed) return;
  ensure_connected(peer);
}

void VerbsChannel::known_peers(std::vector<int>& into) const {
  into.clear();
  peers_.for_each([&](int peer, const Peer&) { into.push_back(peer); });
}

VerbsChannel::Peer& VerbsChannel::peer_for_new_operation(int peer) {
  Peer& p = peers_[peer];
  if (!device_failure_.ok() && !p.failed) fail_peer(peer, device_failure_);
  return p;
}

void VerbsChannel::post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                             Completion done) {
  Peer& p = peer_for_new_operation(peer);
  if (p.failed) return completions_.add(std::move(done), p.failure, 0);
  if (!p.connected) ensure_connected(peer);  // a connected peer stays so (or fails)

  // Fast path: a message of one part with nothing queued ahead of it goes straight to the wire.
  const bool eager = length <= options_.eager_limit;
  size_t posted = 0;
  if (length <= options_.eager_buffer && p.outgoing.empty() && p.connected && !p.announce &&
      post_eager_part(peer, tag, static_cast<const std::byte*>(buffer), length, posted)) {
    return completions_.add(std::move(done), Status(), length);
  }
  if (p.failed) return completions_.add(std::move(done), p.failure, 0);

  const uint32_t id = new_id();
  sends_.emplace(id,
                 SendOp{peer, tag, static_cast<const std::byte*>(buffer), length, std::move(done)});
  ++p.open_ops;
  p.outgoing.push_back({eager ? Outgoing::Step::eager : Outgoing::Step::rendezvous_request, id});
  pump(peer);
}

void VerbsChannel::post_recv(int peer, uint64_t tag, void* buffer, size_t capacity,
                             Completion done) {
  Peer& p = peer_for_new_operation(peer);
  PostedRecv posted{static_cast<std::byte*>(buffer), capacity, std::move(done)};
  if (auto arrival = matches_.take_unexpected({peer, tag})) {
    if (arrival->withdrawn) {
      completions_.add(std::move(posted.done), withdrawn(peer, "sender"), 0);
    } else if (arrival->type == wire::Type::eager) {
      deliver_eager(peer, posted, arrival->payload.data(), arrival->payload.size());
    } else if (p.failed) {  // an offer from a peer failed since: nobody would answer it
      completions_.add(std::move(posted.done), p.failure, 0);
    } else {
      start_rendezvous_recv(peer, std::move(posted), tag, arrival->send_id, arrival->length);
    }
    return;
  }
  if (p.failed) return completions_.add(std::move(posted.done), p.failure, 0);
  if (!p.connected) ensure_connected(peer);
  matches_.add_posted({peer, tag}, std::move(posted));
  ++p.open_ops;
}

void VerbsChannel::cancel(uint64_t first, uint64_t last) {
  withdraw_receives(first, last);
  withdraw_sends(first, last);
}

int VerbsChannel::poll() {
  ibv_wc wc[kPollBatch];
  const int n = cq_->poll(wc, kPollBatch);
  {
    struct Hold {  // released however handling ends
      bool& holding;
      ~Hold() { holding = false; }
    } hold{holding_credits_ = true};
    for (int i = 0; i < n; ++i)
      handle(wc[i]);
  }
  // (Credits still held: a refill threw last time, and must be done before they go.)
  if (n > 0 || !credits_home_.empty()) srq_->refill();
  // The consumed buffers are posted again: only now may credits go out (before, a credit could
  // come back to a sender ahead of its buffer, and the sender's next message find the queue
  // empty: an RNR NAK, and a queue that may stay dry while its process computes).
  while (!credits_home_.empty()) {  // one by one: what is left is what has not come home yet
    const int peer = credits_home_.back();
    credits_home_.pop_back();
    owed_while_holding_.push_back(peer);
    credit_came_home(peer);
  }
  for (int peer : owed_while_holding_)
    if (peers_[peer].credits_to_return > 0) pump(peer);
  owed_while_holding_.clear();
  if (starved_) {  // slots or CQ room came back: every peer may have something waiting
    starved_ = false;
    known_peers(starved_peers_);
    for (int peer : starved_peers_)
      pump(peer);
  }
  // Reading the clock costs more than an empty poll: look at it every kPollsPerClockRead.
  if (++polls_since_tick_ >= kPollsPerClockRead) {
    polls_since_tick_ = 0;
    now_ = Clock::now();
    if (now_ >= next_tick_) {
      next_tick_ = now_ + kTickInterval;
      on_tick(now_);
    }
  }
  if (!failed_queues_.empty()) release_flushed_queues();
  int events = std::max(n, 0);
  return events + completions_.run();
}

void VerbsChannel::handle(const ibv_wc& wc) {
  switch (work_kind(wc.wr_id)) {
    case WorkKind::srq_receive:
      return on_receive(wc);
    case WorkKind::send:
      return on_send_done(wc);
    case WorkKind::rdma_write:
      return on_write_done(wc);
    case WorkKind::probe:
      return on_probe_done(wc);
    default:
      if (!connector_->on_completion(wc)) {
        IBCOLL_LOG(error, "completion with an unknown work id " << wc.wr_id);
      }
  }
}

Status VerbsChannel::completion_error(const ibv_wc& wc, int peer, const char* what) const {
  return Status(Code::peer_failed, std::string(what) + " with peer " + std::to_string(peer) +
                                       " failed: " + ibv_wc_status_str(wc.status) + " (status " +
                                       std::to_string(wc.status) + ", vendor error " +
                                       std::to_string(wc.vendor_err) + ")");
}

void VerbsChannel::on_send_done(const ibv_wc& wc) {
  on_acknowledged(wc, slots_[work_index(wc.wr_id)], "send", false);
}

void VerbsChannel::on_probe_done(const ibv_wc& wc) {
  on_acknowledged(wc, static_cast<int>(work_index(wc.wr_id)), "keepalive", true);
}

void VerbsChannel::on_acknowledged(const ibv_wc& wc, int peer, const char* what, bool probe) {
  SendQueue& queue = *peers_[peer].queue;  // it was posted there
  retire_through(queue, wc.wr_id);
  if (wc.status != IBV_WC_SUCCESS) {
    // Retries exhausted: the peer's port no longer answers.
    return fail_queue(queue, peer, completion_error(wc, peer, what),
                      wc.status == IBV_WC_RETRY_EXC_ERR);
  }
  acknowledged(peer, probe);
  pump_sharing(queue, peer);
}

// A chunk of a rendezvous's RDMA writes is complete (kLastChunk: its last). The send ends with
// its last chunk, or, withdrawn midway or failed with its peer, once no chunk of it is in flight
// any more: until then the device may still read the caller's buffer.
void VerbsChannel::on_write_done(const ibv_wc& wc) {
  const uint64_t index = work_index(wc.wr_id);
  auto it = sends_.find(static_cast<uint32_t>(index));
  if (it == sends_.end()) {  // a send ends after its last chunk completes
    IBCOLL_LOG(error, "RDMA write completion for no send (work id " << wc.wr_id << ")");
    return;
  }
  SendOp& op = it->second;
  const int peer = op.peer;
  Peer& p = peers_[peer];
  SendQueue& queue = *p.queue;
  retire_through(queue, wc.wr_id);
  if (wc.status != IBV_WC_SUCCESS) {
    // The QP is in error: an INI fails every peer behind it (this one perhaps failed already).
    // The chunk still counts as in flight here, so failing the peer leaves the send to us.
    fail_queue(queue, peer, completion_error(wc, peer, "RDMA write"), false);
  }
  --op.chunks_in_flight;
  if (p.failed) {
    if (op.chunks_in_flight == 0) end_send(it, p.failure, 0);
  } else {
    acknowledged(peer, false);
    const bool last = (index & kLastChunk) != 0;
    if (last || ((!op.done || !op.cut.ok()) && op.chunks_in_flight == 0)) {
      --p.open_ops;
      end_send(it, Status(), op.length);
    }
  }
  pump_sharing(queue, peer);
}

void VerbsChannel::end_send(Sends::iterator send, const Status& status, size_t bytes) {
  SendOp& op = send->second;
  if (op.registration) registrations_->release(op.registration);
  if (op.cut.ok()) {
    completions_.add(std::move(op.done), status, bytes);
  } else {
    completions_.add(std::move(op.done), op.cut, 0);
  }
  sends_.erase(send);
}

void VerbsChannel::pump_sharing(SendQueue& queue, int peer) {
  pump(peer);  // nothing if it failed, which took it out of queue.peers
  if (queue.peers.empty() || (queue.peers.size() == 1 && queue.peers.front() == peer)) {
    return;  // RC, or alone on its INI
  }
  sharing_ = queue.peers;  // a pump may fail a peer, which leaves queue.peers
  for (int other : sharing_)
    if (other != peer) pump(other);
}

// Work on the peer's QP completed: its port acknowledged, so it lives. A probe posted behind
// earlier work (megabytes of RDMA writes on a slow link) counts its time from this progress.
void VerbsChannel::acknowledged(int peer, bool probe) {
  Peer& p = peers_[peer];
  p.last_heard = now_;
  if (probe) {
    p.probe_outstanding = false;
  } else if (p.probe_outstanding) {
    p.probe_sent = now_;
  }
}

uint32_t VerbsChannel::credits_for(int peer) {
  (void)peers_[peer];  // a peer with a link has state here: a device failure reaches it
  const uint32_t grant = credits_.open(peer, now_);
  check_credits_backed();
  tell_credit_notices();
  return grant;
}

void VerbsChannel::tell_credit_notices() {
  std::vector<CreditLedger::Notice>& notices = credits_.notices();
  if (notices.empty()) return;
  const std::vector<CreditLedger::Notice> told = std::move(notices);
  notices.clear();
  for (const CreditLedger::Notice& n : told) {
    Peer& p = peers_[n.peer];
    p.credits_to_return += n.grant;
    credits_owed_ += n.grant;
    p.credits_to_recall += n.recall;
    pump(n.peer);
  }
}

void VerbsChannel::on_connected(int peer, bool announce) {
  Peer& p = peers_[peer];
  p.connected = true;
  p.announce = announce;
  // Added: with XRC the peer's messages (and the credits they return) may come first.
  p.send_credits += connector_->granted_credits(peer);
  const SendPath path = connector_->send_path(peer);
  SendQueue& queue = queues_[path.qp->qp_num];
  if (!queue.qp) {
    queue.qp = path.qp;
    queue.caps = path.caps;
    queue.max_send_wr = std::min(path.caps.max_send_wr, kSendDepthPerQp);
  }
  queue.peers.push_back(peer);
  p.queue = &queue;
  p.remote_srq_num = path.remote_srq_num;
  p.last_heard = now_ = Clock::now();
  pump(peer);
}

void VerbsChannel::fail_peer(int peer, const Status& status, bool gone) {
  Peer& p = peers_[peer];
  if (p.failed) return;
  p.failed = true;
  p.failure = status;
  p.failed_at = now_;
  if (gone && observer_) observer_->peer_gone(*this, peer, status);
  if (SendQueue* queue = p.queue) {
    std::erase(queue->peers, peer);
    // Its RC QP goes into the error state: whatever is still posted flushes back, giving its
    // slots back. An XRC INI is left to the connector, which retires it once no peer (connected
    // or not yet) uses it; what this peer posted on it completes as the QP goes on.
    if (queue->peers.empty() && !xrc_) {
      move_to_error(queue->qp);
      failed_queues_.push_back(peer);
    }
  }
  p.outgoing.clear();
  p.news.clear();
  p.open_ops = 0;
  credits_owed_ -= std::exchange(p.credits_to_return, 0);  // the ledger takes them home
  connector_->forget(peer);
  ++counters_.failed_peers;
  IBCOLL_LOG(warn, "peer " << peer << " failed: " << status.message());
  for (auto it = sends_.begin(); it != sends_.end();) {
    auto send = it++;
    // A write in flight may still read the caller's buffer: on an RC QP until it flushes back,
    // on a shared XRC INI (left running) until it completes. The send ends when it does.
    if (send->second.peer == peer && send->second.chunks_in_flight == 0) {
      end_send(send, status, 0);
    }
  }
  for (auto it = rendezvous_.begin(); it != rendezvous_.end();) {
    if (it->second.peer != peer) {
      ++it;
      continue;
    }
    if (it->second.registration) registrations_->revoke(it->second.registration);
    completions_.add(std::move(it->second.done), status, 0);
    it = rendezvous_.erase(it);
  }
  matches_.fail_peer(peer, [&](PostedRecv& r) { completions_.add(std::move(r.done), status, 0); });
  if (p.assembly && p.assembly->posted) {
    completions_.add(std::move(p.assembly->posted->done), status, 0);
  }
  p.assembly.reset();
  credits_.close(peer);  // what it was lent is home, for the others
  tell_credit_notices();
}

void VerbsChannel::release_flushed_queues() {
  std::erase_if(failed_queues_, [&](int peer) {
    Peer& p = peers_[peer];
    // Unsignaled sends that completed before the error leave no completion to flush: a
    // signaled write of no bytes behind them flushes back and retires them (and their slots).
    if (!p.queue->unacked.empty() && !p.queue->unacked.back().signaled) post_probe(peer);
    if (!p.queue->unacked.empty()) return false;
    queues_.erase(p.queue->qp->qp_num);
    p.queue = nullptr;
    connector_->release(peer);
    ++counters_.released_connections;
    return true;
  });
}

void VerbsChannel::fail_queue(SendQueue& queue, int peer, const Status& status, bool gone) {
  fail_peer(peer, status, gone);
  const std::vector<int> sharing = queue.peers;  // each failure takes its peer out
  for (int other : sharing) {
    fail_peer(other,
              Status(Code::peer_failed, "the XRC connection to peer " + std::to_string(other) +
                                            "'s node failed: " + status.message()),
              gone);
  }
}

void VerbsChannel::fail_stuck_initiators(Clock::time_point now) {
  std::vector<SendQueue*> stuck;
  for (const auto& [id, op] : sends_) {
    const Peer& p = peers_[op.peer];
    if (p.failed && op.chunks_in_flight > 0 && !p.queue->peers.empty() &&
        now - p.failed_at >= kUnansweredProbes * options_.keepalive) {
      stuck.push_back(p.queue);
    }
  }
  for (SendQueue* queue : stuck) {
    if (queue->peers.empty()) continue;  // failed with an earlier one
    const int peer = queue->peers.front();
    fail_queue(*queue, peer,
               Status(Code::peer_failed,
                      "RDMA writes to a failed peer of peer " + std::to_string(peer) +
                          "'s node did not complete on the XRC connection to it within " +
                          std::to_string((kUnansweredProbes * options_.keepalive).count()) +
                          " ms (IBCOLL_KEEPALIVE)"),
               false);
  }
}

void VerbsChannel::end_every_send(const Status& status) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    auto send = it++;
    end_send(send, status, 0);
  }
}

void VerbsChannel::tell(int peer, const Notice& notice) {
  check_peer(peer, "tell");
  Peer& p = peer_for_new_operation(peer);
  if (p.failed) return;
  p.news.push_back({wire::Type::notice, notice.subject, notice.packed()});
  if (p.connected) {
    pump(peer);
  } else {
    ensure_connected(peer);  // told once connected (on_connected pumps)
  }
}

bool VerbsChannel::notices_pending() const {
  bool pending = false;
  peers_.for_each([&](int, const Peer& p) { pending = pending || (!p.failed && !p.news.empty()); });
  return pending;
}

void VerbsChannel::tell_peers(const Notice& notice) {
  std::vector<int> known;
  known_peers(known);
  for (int peer : known) {
    Peer& p = peers_[peer];
    if (!p.connected || p.failed) continue;
    if (notice.kind == Notice::Kind::rank_gone && static_cast<uint64_t>(peer) == notice.subject)
      continue;
    tell(peer, notice);
  }
}

void VerbsChannel::on_tick(Clock::time_point now) {
  connector_->tick(now);
  credits_.recall_idle(now, kCreditIdle);
  tell_credit_notices();
  if (xrc_) fail_stuck_initiators(now);
  peers_to_visit_.clear();
  peers_.for_each([&](int peer, const Peer& p) {
    if (p.connected && !p.failed && p.open_ops > 0) peers_to_visit_.push_back(peer);
  });
  for (int peer : peers_to_visit_) {
    Peer& p = peers_[peer];
    if (p.failed) continue;  // failed by an earlier one's visit
    if (p.probe_outstanding) {
      // A live peer's QP acknowledges at once, whatever its process is doing. Hardware fails
      // an unacknowledged send after its retries; Soft-RoCE may never do so, hence this check.
      if (now - p.probe_sent >= kUnansweredProbes * options_.keepalive) {
        fail_peer(peer,
                  Status(Code::peer_failed,
                         "peer " + std::to_string(peer) + " stopped acknowledging (no " +
                             "answer to a keepalive in " +
                             std::to_string((kUnansweredProbes * options_.keepalive).count()) +
                             " ms, IBCOLL_KEEPALIVE)"),
                  true);
      }
      continue;
    }
    if (now - p.last_heard >= options_.keepalive && now - p.last_keepalive >= options_.keepalive) {
      // Writing is how a dead peer shows: the RC transport retries, then fails the probe.
      IBCOLL_LOG(debug, "probing silent peer " << peer);
      p.keepalive = true;
      p.last_keepalive = now;
      pump(peer);
    }
  }
  on_async_event();
}

void VerbsChannel::on_async_event() {
  ibv_async_event event;
  while (ibv_get_async_event(device_->context(), &event) == 0) {
    const char* what = ibv_event_type_str(event.event_type);
    switch (event.event_type) {
      case IBV_EVENT_SRQ_LIMIT_REACHED:
        srq_->on_limit_reached();
        break;
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_PATH_MIG_ERR:
        if (auto queue = queues_.find(event.element.qp->qp_num);
            queue != queues_.end() && !queue->second.peers.empty()) {
          const int peer = queue->second.peers.front();
          fail_queue(
              queue->second, peer,
              Status(Code::peer_failed, "connection to peer " + std::to_string(peer) + ": " + what),
              false);
        } else if (int peer = connector_->peer_of_qp(event.element.qp->qp_num); peer >= 0) {
          fail_peer(peer, Status(Code::peer_failed,
                                 "connection to peer " + std::to_string(peer) + ": " + what));
        }
        break;
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_DEVICE_FATAL: {
        device_failure_ = Status(Code::peer_failed, device_->name() + ": " + what);
        std::vector<int> known;
        known_peers(known);
        for (int peer : known)
          if (peer != rank_) fail_peer(peer, device_failure_);
        if (event.event_type == IBV_EVENT_DEVICE_FATAL) end_every_send(device_failure_);
        break;
      }
      default:
        IBCOLL_LOG(debug, "async event: " << what);
        break;
    }
    ibv_ack_async_event(&event);
  }
}

ChannelCounters VerbsChannel::counters() const {
  ChannelCounters c = counters_;
  const auto wireup = connector_->stats();
  c.connections = wireup.connections;
  c.handshake_retries = wireup.handshake_retries;
  c.shared_receive_queues = 1;
  c.posted_receives = srq_->posted();
  c.srq_depth = srq_->depth();
  c.srq_limit_events = srq_->limit_events();
  for (const auto& [qp_num, queue] : queues_) {
    c.rdma_writes_in_flight += std::ranges::count_if(queue.unacked, [](const Unacked& u) {
      return work_kind(u.work_id) == WorkKind::rdma_write;
    });
  }
  c.registration_hits = registrations_->stats().hits;
  c.registration_misses = registrations_->stats().misses;
  c.registrations_unmapped = registrations_->stats().unmapped;
  c.early_arrivals = matches_.unexpected_count();
  c.early_arrival_bytes = early_arrivals_.held_bytes();
  return c;
}

}  // namespace ibcoll::transport::verbs
