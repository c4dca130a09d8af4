// UcxChannel: set-up, endpoints, sending, UCX's completions and peer failure.
#include "transport/ucx/ucx_channel.h"

#include <algorithm>
#include <cstring>

#include "base/deadline.h"
#include "base/log.h"

namespace ibcoll::transport::ucx {
namespace {

// A flush to a silent peer not done within so many keepalive intervals fails the peer; twice
// as many where our own traffic with it may hold the flush up.
constexpr int kProbeIntervals = 4;
constexpr int kBusyPeerProbeIntervals = 2 * kProbeIntervals;

Status ucx_failure(int peer, const char* what, ucs_status_t status) {
  return Status(Code::peer_failed, std::string("UCX ") + what + " peer " + std::to_string(peer) +
                                       ": " + ucs_status_string(status));
}

}  // namespace

UcxChannel::UcxChannel(int rank, int size, const Options& options)
    : options_(options),
      rank_(rank),
      size_(size),
      context_(options.wakeup, options.keepalive),
      worker_(context_, options.wakeup) {
  ucp_am_handler_param_t handler{};
  handler.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_FLAGS |
                       UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG;
  handler.id = UcxHeader::kActiveMessageId;
  handler.flags = UCP_AM_FLAG_WHOLE_MSG;
  handler.cb = &UcxChannel::on_message;
  handler.arg = this;
  check_ucs(ucp_worker_set_am_recv_handler(worker_.get(), &handler),
            "ucp_worker_set_am_recv_handler");
}

UcxChannel::~UcxChannel() {
  // Endpoints close with a flush (a failed one by force), and what they still carry completes
  // meanwhile. A flush unanswered for as long as the probe allows a silent peer means a peer
  // dead unnoticed (the job may be ending without a barrier), so that bounds the wait too. What
  // is left goes with the worker, which is destroyed first of the members (declared last), while
  // the records its callbacks name still exist.
  closing_down_ = true;  // nothing new is sent, no endpoint made
  peers_.for_each([&](int, Peer& p) { close_endpoint(p, p.failed || p.gone); });
  const Deadline deadline(
      std::min(options_.liveness, kBusyPeerProbeIntervals * options_.keepalive));
  auto closed = [&] {
    std::erase_if(closing_, [](void* request) {
      if (ucp_request_check_status(request) == UCS_INPROGRESS) return false;
      ucp_request_free(request);
      return true;
    });
    return closing_.empty();
  };
  while (!closed() && !deadline.expired()) {
    ucp_worker_progress(worker_.get());
    finish_requests();
  }
  // A peer's endpoint made lately (to tell this rank something, say) may have left this worker a
  // wire-up reply to send on an endpoint of UCX's own, which no close above reaches; UCX 1.13
  // aborts when a worker is destroyed with one pending (ucp_request_send_state_ff, "got REP
  // message"). So the worker is flushed too, within what is left of the same deadline.
  ucp_request_param_t flush{};
  void* flushing = ucp_worker_flush_nbx(worker_.get(), &flush);
  if (flushing && !UCS_PTR_IS_ERR(flushing)) {
    while (ucp_request_check_status(flushing) == UCS_INPROGRESS && !deadline.expired())
      ucp_worker_progress(worker_.get());
    ucp_request_free(flushing);
  }
  finish_requests();
  for (void* request : closing_)
    ucp_request_free(request);  // released by UCX once done
}

void UcxChannel::set_peer_addresses(std::vector<std::string> addresses) {
  addresses_ = std::move(addresses);
}

UcxChannel::Peer& UcxChannel::peer_entry(int peer) {
  Peer& p = peers_[peer];
  if (!p.channel) {
    p.channel = this;
    p.rank = peer;
  }
  return p;
}

ucp_ep_h UcxChannel::endpoint(int peer) {
  Peer& p = peer_entry(peer);
  if (p.endpoint || p.failed || closing_down_) return p.endpoint;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(addresses_.at(peer).data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = &UcxChannel::on_endpoint_error;
  params.err_handler.arg = &p;
  const ucs_status_t status = ucp_ep_create(worker_.get(), &params, &p.endpoint);
  if (status != UCS_OK) {
    p.endpoint = nullptr;
    reported_failures_.emplace_back(peer, ucx_failure(peer, "endpoint to", status));
    return nullptr;
  }
  ++counters_.endpoints;
  IBCOLL_LOG(debug, "UCX endpoint to rank " << peer);
  return p.endpoint;
}

void UcxChannel::close_endpoint(Peer& p, bool force) {
  if (p.flush) {
    ucp_request_free(p.flush);  // UCX releases it once the close ends it
    p.flush = nullptr;
  }
  if (!p.endpoint) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0;
  void* request = ucp_ep_close_nbx(p.endpoint, &param);
  p.endpoint = nullptr;
  if (request && !UCS_PTR_IS_ERR(request)) closing_.push_back(request);
}

void* UcxChannel::send_message(int peer, const UcxHeader& header, InFlight& in_flight,
                               const void* payload, size_t length, bool rendezvous) {
  ucp_ep_h ep = endpoint(peer);
  if (!ep) return UCS_STATUS_PTR(UCS_ERR_UNREACHABLE);
  ucp_request_param_t param{};
  param.op_attr_mask =
      UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
  param.cb.send = &UcxChannel::on_send_done;
  param.user_data = &in_flight;
  param.flags = rendezvous ? UCP_AM_SEND_FLAG_RNDV : UCP_AM_SEND_FLAG_EAGER;
  if (header.type != UcxHeader::Type::probe) peers_[peer].sent = true;
  void* request = ucp_am_send_nbx(ep, UcxHeader::kActiveMessageId, &header, sizeof(header), payload,
                                  length, &param);
  if (UCS_PTR_IS_ERR(request)) {
    reported_failures_.emplace_back(peer, ucx_failure(peer, "send to", UCS_PTR_STATUS(request)));
  }
  return request;
}

void UcxChannel::send_control(int peer, UcxHeader::Type type, uint64_t tag, uint32_t id,
                              uint64_t length, uint32_t reply_id) {
  const uint32_t control_id = new_id();
  ControlSend& c = controls_[control_id];
  c.header = {.type = type,
              .source = static_cast<uint32_t>(rank_),
              .tag = tag,
              .length = length,
              .id = id,
              .reply_id = reply_id};
  c.in_flight = {InFlight::Of::control, this, control_id};
  void* request = send_message(peer, c.header, c.in_flight, nullptr, 0, false);
  if (!request || UCS_PTR_IS_ERR(request)) controls_.erase(control_id);
}

void UcxChannel::post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                           Completion done) {
  Peer& p = peer_entry(peer);
  if (p.failed) {
    completions_.add(std::move(done), p.failure, 0);
    return;
  }
  const uint32_t id = new_id();
  SendOp& op = sends_[id];
  op.peer = peer;
  op.tag = tag;
  op.data = static_cast<const std::byte*>(buffer);
  op.length = length;
  op.done = std::move(done);
  op.in_flight = {InFlight::Of::send, this, id};
  const bool eager = length <= options_.eager_limit;
  op.header = {.type = eager ? UcxHeader::Type::eager : UcxHeader::Type::request,
               .source = static_cast<uint32_t>(rank_),
               .tag = tag,
               .length = length,
               .id = id,
               .reply_id = p.next_sequence_out++};
  ++counters_.messages_sent;
  counters_.bytes_sent += length;
  if (!eager) {
    op.asked = true;
    void* request = send_message(peer, op.header, op.in_flight, nullptr, 0, false);
    if (UCS_PTR_IS_ERR(request)) return;  // fails with its peer
    op.request = request;
    return;
  }
  // A copy, so that a withdrawn send never reads its buffer again.
  op.bounce = PooledBytes(payloads_, length);
  if (length) std::memcpy(op.bounce.data(), buffer, length);
  void* request = send_message(peer, op.header, op.in_flight, op.bounce.data(), length, false);
  if (UCS_PTR_IS_ERR(request)) return;
  if (!request) {
    end_send(id, {});
    return;
  }
  op.request = request;
}

void UcxChannel::end_send(uint32_t id, const Status& status) {
  auto it = sends_.find(id);
  if (it == sends_.end()) return;
  SendOp& op = it->second;
  if (op.request) {  // UCX is not done with it: it ends then
    if (op.cut.ok()) op.cut = status;
    return;
  }
  if (!op.withdrawn) completions_.add(std::move(op.done), status, status.ok() ? op.length : 0);
  sends_.erase(it);
}

void UcxChannel::end_rendezvous_recv(uint32_t id, const Status& status, size_t bytes) {
  auto it = rendezvous_.find(id);
  if (it == rendezvous_.end()) return;
  RendezvousRecv& r = it->second;
  if (r.request) {
    if (r.cut.ok()) r.cut = status;
    return;
  }
  if (!r.withdrawn) completions_.add(std::move(r.done), status, bytes);
  rendezvous_.erase(it);
}

void UcxChannel::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* in_flight = static_cast<InFlight*>(user_data);
  in_flight->status = status;
  in_flight->request = request;
  in_flight->channel->finished_.push_back(in_flight);
}

void UcxChannel::on_data_received(void* request, ucs_status_t status, size_t length,
                                  void* user_data) {
  auto* in_flight = static_cast<InFlight*>(user_data);
  in_flight->status = status;
  in_flight->bytes = length;
  in_flight->request = request;
  in_flight->channel->finished_.push_back(in_flight);
}

void UcxChannel::on_endpoint_error(void* arg, ucp_ep_h endpoint, ucs_status_t status) {
  (void)endpoint;
  auto* p = static_cast<Peer*>(arg);
  p->gone = true;
  p->channel->reported_failures_.emplace_back(p->rank,
                                              ucx_failure(p->rank, "connection to", status));
}

// An op is not erased while UCX holds its request, so the InFlight each callback named is
// still there.
void UcxChannel::finish_requests() {
  while (!finished_.empty()) {
    finishing_.swap(finished_);
    for (InFlight* f : finishing_) {
      ucp_request_free(f->request);
      f->request = nullptr;
      const uint32_t id = f->id;
      const ucs_status_t ucs = f->status;
      switch (f->of) {
        case InFlight::Of::control:
          controls_.erase(id);
          break;
        case InFlight::Of::send: {
          SendOp& op = sends_.at(id);
          op.request = nullptr;
          if (ucs == UCS_OK && op.cut.ok() && !op.withdrawn) {
            if (op.asked) break;  // its request went: the answer decides
            if (op.answered) {    // the answer came while UCX held the request's header
              post_data(op);
              break;
            }
          }
          const Status status = !op.cut.ok()    ? op.cut
                                : ucs != UCS_OK ? ucx_failure(op.peer, "send to", ucs)
                                                : Status{};
          end_send(id, status);
          break;
        }
        case InFlight::Of::rendezvous_recv: {
          RendezvousRecv& r = rendezvous_.at(id);
          r.request = nullptr;
          const Status status = !r.cut.ok()     ? r.cut
                                : ucs != UCS_OK ? ucx_failure(r.peer, "receive from", ucs)
                                                : receive_status(r.peer, r.offered, r.capacity);
          const bool landed = status.ok() || status.code() == Code::truncated;
          end_rendezvous_recv(id, status, landed ? f->bytes : 0);
          break;
        }
      }
    }
    finishing_.clear();
  }
}

void UcxChannel::fail_peers_reported() {
  while (!reported_failures_.empty()) {
    auto [peer, status] = std::move(reported_failures_.back());
    reported_failures_.pop_back();
    fail_peer(peer, status, peers_[peer].gone);
  }
}

void UcxChannel::fail_peer(int peer, const Status& status, bool gone) {
  Peer& p = peer_entry(peer);
  if (p.failed) return;
  p.failed = true;
  p.failure = status;
  ++counters_.failed_peers;
  IBCOLL_LOG(info, status.message());
  matches_.fail_peer(peer, [&](PostedRecv& r) { completions_.add(std::move(r.done), status, 0); });
  std::vector<uint32_t> ids;
  for (auto& [id, op] : sends_)
    if (op.peer == peer) ids.push_back(id);
  for (uint32_t id : ids)
    end_send(id, status);  // one UCX holds ends when UCX lets it go
  ids.clear();
  for (auto& [id, r] : rendezvous_)
    if (r.peer == peer) ids.push_back(id);
  for (uint32_t id : ids)
    end_rendezvous_recv(id, status, 0);
  // Force: UCX completes whatever is still posted on it (with an error) once its lanes flush.
  close_endpoint(p, true);
  if (gone && observer_) observer_->peer_gone(*this, peer, status);
}

bool UcxChannel::in_flight(InFlight::Of of, uint32_t id) const {
  if (of == InFlight::Of::send) {
    auto it = sends_.find(id);
    return it != sends_.end() && it->second.request;
  }
  auto it = rendezvous_.find(id);
  return it != rendezvous_.end() && it->second.request;
}

void UcxChannel::wait_out(const std::vector<std::pair<InFlight::Of, uint32_t>>& pending) {
  auto moving = [&] {
    return std::any_of(pending.begin(), pending.end(),
                       [&](const auto& p) { return in_flight(p.first, p.second); });
  };
  for (int round = 0; round < 2 && moving(); ++round) {
    const Deadline deadline(options_.liveness);
    while (moving() && !deadline.expired()) {
      ucp_worker_progress(worker_.get());
      finish_requests();
    }
    if (!moving()) break;
    // Past the limit: its peer is failed and its endpoint closed by force, which ends what
    // is posted on it; that is waited for as long again.
    for (const auto& [of, id] : pending) {
      if (!in_flight(of, id)) continue;
      const int peer = of == InFlight::Of::send ? sends_.at(id).peer : rendezvous_.at(id).peer;
      fail_peer(peer,
                Status(Code::peer_failed, "UCX: a withdrawn message to or from peer " +
                                              std::to_string(peer) + " was still moving after " +
                                              std::to_string(options_.liveness.count()) + " ms"),
                false);
    }
  }
  if (moving()) {
    IBCOLL_LOG(error,
               "UCX: a withdrawn message's data was still moving after its endpoint was "
               "closed by force; its buffer may yet be touched");
  }
}

void UcxChannel::check_liveness(Clock::time_point now) {
  peers_.for_each([](int, Peer& p) { p.waited_on = p.busy = false; });
  auto mark = [&](int peer, bool Peer::*what) {
    if (Peer* p = peers_.find(peer)) p->*what = true;
  };
  for (const auto& [id, r] : rendezvous_)  // its data begun, or not yet
    mark(r.peer, r.request ? &Peer::busy : &Peer::waited_on);
  for (const auto& [id, op] : sends_) {
    if (op.request) mark(op.peer, &Peer::busy);
    if (op.asked) mark(op.peer, &Peer::waited_on);  // no answer yet
  }
  probed_.clear();
  std::vector<std::pair<int, Status>> silent;
  peers_.for_each([&](int peer, Peer& p) {
    if (p.heard || p.last_heard == Clock::time_point{}) {
      p.heard = false;
      p.last_heard = now;
      if (p.flush) p.last_probe = now;  // it lives: the flush waits behind traffic
    }
    // What we sent lately, or data of ours moving with the peer: a flush waits behind it (UCX
    // completes an eager send before the peer acknowledges it; seconds on a slow link), so a
    // slow flush is given twice as long.
    if (p.sent || p.busy) {
      p.sent = false;
      p.last_sent = now;
    }
    if (p.flush && ucp_request_check_status(p.flush) != UCS_INPROGRESS) {
      ucp_request_free(p.flush);
      p.flush = nullptr;
    }
    // Not a peer this rank has no endpoint to (it only received): a new endpoint's wire-up
    // needs the peer's process, which may be computing. Its death shows in its senders'.
    if (p.failed || !p.endpoint) return;
    const int intervals = now - p.last_sent < kProbeIntervals * options_.keepalive
                              ? kBusyPeerProbeIntervals
                              : kProbeIntervals;
    if (p.flush && now - p.last_probe >= intervals * options_.keepalive) {
      const auto silent_for =
          std::chrono::duration_cast<std::chrono::milliseconds>(now - p.last_probe);
      silent.emplace_back(
          peer,
          Status(Code::peer_failed,
                 "UCX: peer " + std::to_string(peer) + "'s connection acknowledged nothing for " +
                     std::to_string(silent_for.count()) + " ms (" + std::to_string(intervals) +
                     " IBCOLL_KEEPALIVE intervals)"));
      return;
    }
    if (!p.waited_on && matches_.posted_count(peer) == 0) return;
    if (p.flush || now - p.last_heard < options_.keepalive ||
        now - p.last_probe < options_.keepalive) {
      return;
    }
    p.last_probe = now;
    probed_.push_back(peer);
  });
  for (auto& [peer, status] : silent)
    fail_peer(peer, status, true);
  for (int peer : probed_) {
    send_control(peer, UcxHeader::Type::probe, 0, 0, 0);
    Peer& p = peers_[peer];
    if (!p.endpoint) continue;
    ucp_request_param_t param{};
    void* flush = ucp_ep_flush_nbx(p.endpoint, &param);
    if (UCS_PTR_IS_PTR(flush)) p.flush = flush;  // null: done; an error: the endpoint's handler
  }
}

int UcxChannel::poll() {
  int events = static_cast<int>(ucp_worker_progress(worker_.get()));
  finish_requests();
  // Reading the clock costs more than an empty poll: every 64 polls.
  if (++polls_since_clock_ >= 64) {
    polls_since_clock_ = 0;
    const Clock::time_point now = Clock::now();
    if (now >= next_liveness_check_) {
      next_liveness_check_ = now + options_.keepalive / 4;
      check_liveness(now);
    }
  }
  fail_peers_reported();
  while (!heard_.empty()) {
    const Heard news = heard_.back();
    heard_.pop_back();
    if (observer_) observer_->heard(*this, news.teller, news.notice);
  }
  events += completions_.run();
  return events;
}

int UcxChannel::arm_event_fd() {
  if (worker_.event_fd() < 0) return -1;
  // Busy: events are waiting, so the engine must poll rather than sleep.
  return ucp_worker_arm(worker_.get()) == UCS_OK ? worker_.event_fd() : -1;
}

void UcxChannel::tell(int peer, const Notice& notice) {
  check_peer(peer, "tell");
  if (peer_entry(peer).failed) return;
  send_control(peer, UcxHeader::Type::notice, notice.subject, 0, notice.packed());
}

void UcxChannel::tell_peers(const Notice& notice) {
  std::vector<int> told;
  peers_.for_each([&](int peer, Peer& p) {
    if (p.endpoint && !p.failed) told.push_back(peer);
  });
  for (int peer : told)
    tell(peer, notice);
}

}  // namespace ibcoll::transport::ucx
