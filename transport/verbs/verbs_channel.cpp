#include "transport/verbs/verbs_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>

#include <algorithm>
#include <cstring>
#include <random>

#include "base/log.h"
#include "transport/verbs/rdmacm_connector.h"
#include "transport/verbs/ud_connector.h"
#include "transport/verbs/work_id.h"

namespace ibcoll::transport::verbs {
namespace {

constexpr uint32_t kSendSlots = 256;
constexpr uint32_t kSendDepthPerPeer = 128;
constexpr uint32_t kDatagramWork = 2 * 64;  // UD receives and sends in the CQ
constexpr uint32_t kQkey = 0x1bc0c011;
constexpr int kPollBatch = 32;
constexpr auto kTickInterval = std::chrono::milliseconds(1);
constexpr uint32_t kPollsPerClockRead = 64;
constexpr size_t kHeader = sizeof(wire::MessageHeader);
constexpr int kUnansweredProbes = 4;  // keepalive intervals a probe may stay unacknowledged

bool is_credited(wire::Type type) {
  return type == wire::Type::eager || type == wire::Type::rts || type == wire::Type::cts;
}

}  // namespace

VerbsChannel::VerbsChannel(int rank, int size, const Options& options)
    : options_(options), rank_(rank), size_(size) {
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
  xrc_ = open_xrc_domain(*device_, options.xrc, options.xrc_domain_file);
  if (xrc_) {
    // The device has XRC, but XRC INI/TGT wire-up needs hardware this project cannot test on.
    if (options.xrc == XrcMode::on) {
      throw Error(Code::not_supported, "IBCOLL_XRC=on: " + device_->name() +
                                           " has XRC, but ibcoll's XRC connections are not "
                                           "built yet; use auto or off");
    }
    IBCOLL_LOG(info, device_->name() << " supports XRC; ibcoll uses per-peer RC QPs on one "
                                        "shared SRQ until its XRC path lands");
    xrc_.reset();
  }
  ibv_context* context = device_->context();
  pd_ = allocate_pd(context);

  slot_size_ =
      (kHeader + std::max(options.eager_limit, sizeof(wire::ReadyToReceive)) + 63) / 64 * 64;
  cq_budget_ = kSendSlots + 64;
  cq_ = std::make_unique<CompletionQueue>(
      context, static_cast<int>(options.srq_depth + kDatagramWork + cq_budget_),
      options.event_channel);
  srq_ = std::make_unique<SharedReceiveQueue>(context, pd_.get(), options.srq_depth, slot_size_,
                                              nullptr, nullptr);
  send_slab_.reset(new std::byte[size_t{kSendSlots} * slot_size_]);
  send_mr_ = register_memory(pd_.get(), send_slab_.get(), size_t{kSendSlots} * slot_size_);
  slots_.resize(kSendSlots);
  for (uint32_t i = kSendSlots; i > 0; --i)
    free_slots_.push_back(i - 1);
  registrations_ =
      std::make_unique<RegistrationCache>(pd_.get(), options.mr_cache, options.mr_cache_bytes);

  // Keep a quarter of the SRQ for messages that need no credit (credit returns, keepalives).
  const uint32_t peers = static_cast<uint32_t>(std::max(1, size - 1));
  credits_granted_ = std::clamp(options.srq_depth * 3 / 4 / peers, 1u, options.credits);
  std::random_device random;
  const uint64_t incarnation = (uint64_t{random()} << 32) | random();
  const ConnectionSetup setup{.device = *device_,
                              .pd = pd_.get(),
                              .cq = cq_->get(),
                              .srq = srq_->get(),
                              .options = options,
                              .rank = rank,
                              .size = size,
                              .send_depth = kSendDepthPerPeer,
                              .credits = credits_granted_,
                              .incarnation = incarnation};
  auto& listener = static_cast<Listener&>(*this);
  if (options.connect == ConnectMode::rdmacm) {
    connector_ = std::make_unique<RdmaCmConnector>(setup, listener);
  } else {
    connector_ = std::make_unique<UdConnector>(setup, kQkey, listener);
  }
  peers_.resize(static_cast<size_t>(size));
  int flags = fcntl(context->async_fd, F_GETFL);
  fcntl(context->async_fd, F_SETFL, flags | O_NONBLOCK);
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
}

size_t VerbsChannel::max_message_size() const {
  return size_t{1} << 32;
}

uint32_t VerbsChannel::new_id() {
  if (next_id_ == 0) ++next_id_;  // 0 means "no operation"
  return next_id_++;
}

void VerbsChannel::check_peer(int peer, const char* call) const {
  if (peer < 0 || peer >= size_) {
    throw Error(Code::invalid_argument, std::string(call) + ": peer " + std::to_string(peer) +
                                            " is outside [0, " + std::to_string(size_) + ")");
  }
  if (peer == rank_) {
    throw Error(Code::invalid_argument,
                std::string(call) + ": peer " + std::to_string(peer) + " is this process");
  }
}

void VerbsChannel::ensure_connected(int peer) {
  connector_->connect(peer);
}

void VerbsChannel::send(int peer, uint64_t tag, const void* buffer, size_t length,
                        Completion done) {
  check_peer(peer, "send");
  if (!buffer && length > 0) {
    throw Error(Code::invalid_argument,
                "send: buffer is null but length is " + std::to_string(length));
  }
  if (length > max_message_size()) {
    throw Error(Code::invalid_argument, "send: length " + std::to_string(length) +
                                            " exceeds the largest message, " +
                                            std::to_string(max_message_size()));
  }
  if (!done) throw Error(Code::invalid_argument, "send: no completion callback");
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return complete_later(std::move(done), p.failure, 0);
  ensure_connected(peer);

  const uint32_t id = new_id();
  sends_.emplace(id,
                 SendOp{peer, tag, static_cast<const std::byte*>(buffer), length, std::move(done)});
  ++p.open_ops;
  p.outgoing.push_back({length <= options_.eager_limit ? wire::Type::eager : wire::Type::rts, id});
  pump(peer);
}

void VerbsChannel::recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) {
  check_peer(peer, "recv");
  if (!buffer && capacity > 0) {
    throw Error(Code::invalid_argument,
                "recv: buffer is null but capacity is " + std::to_string(capacity));
  }
  if (!done) throw Error(Code::invalid_argument, "recv: no completion callback");
  Peer& p = peers_[static_cast<size_t>(peer)];
  PostedRecv posted{static_cast<std::byte*>(buffer), capacity, std::move(done)};
  if (auto arrival = matches_.take_unexpected({peer, tag})) {
    if (arrival->type == wire::Type::eager) {
      deliver_eager(peer, posted, arrival->payload.data(), arrival->payload.size());
    } else {
      start_rendezvous_recv(peer, std::move(posted), arrival->send_id, arrival->length);
    }
    return;
  }
  if (p.failed) return complete_later(std::move(posted.done), p.failure, 0);
  ensure_connected(peer);
  matches_.add_posted({peer, tag}, std::move(posted));
  ++p.open_ops;
}

int VerbsChannel::poll() {
  ibv_wc wc[kPollBatch];
  const int n = cq_->poll(wc, kPollBatch);
  for (int i = 0; i < n; ++i)
    handle(wc[i]);
  if (n > 0) srq_->refill(false);
  if (starved_) {  // slots or CQ room came back: every peer may have something waiting
    starved_ = false;
    for (int peer = 0; peer < size_; ++peer)
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
  int events = std::max(n, 0);
  while (!deferred_.empty()) {  // callbacks may post more work, and so more completions
    running_.swap(deferred_);   // both keep their capacity: no allocation once warm
    for (auto& [done, status, bytes] : running_)
      done(status, bytes);
    events += static_cast<int>(running_.size());
    running_.clear();
  }
  return events;
}

void VerbsChannel::handle(const ibv_wc& wc) {
  switch (work_kind(wc.wr_id)) {
    case WorkKind::srq_receive:
      return on_receive(wc);
    case WorkKind::send:
      return on_send_done(wc);
    case WorkKind::rdma_write:
      return on_write_done(wc);
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

void VerbsChannel::on_receive(const ibv_wc& wc) {
  const auto index = static_cast<uint32_t>(work_index(wc.wr_id));
  srq_->consumed();
  const int peer = connector_->peer_of_qp(wc.qp_num);
  if (wc.status != IBV_WC_SUCCESS || peer < 0) {
    srq_->release(index);
    if (peer >= 0) fail_peer(peer, completion_error(wc, peer, "receive"));
    return;
  }
  connector_->on_rc_message(peer);
  Peer& p = peers_[static_cast<size_t>(peer)];
  p.last_heard = now_;
  ++counters_.messages_received;
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    ++p.credits_to_return;
    auto it = rendezvous_.find(ntohl(wc.imm_data));
    if (it != rendezvous_.end() && it->second.peer == peer) {
      RendezvousRecv& r = it->second;
      if (r.registration) registrations_->release(r.registration);
      counters_.bytes_received += r.length;
      Status status;
      if (r.offered > r.length) {
        status = Status(Code::truncated, "recv from peer " + std::to_string(peer) +
                                             ": message of " + std::to_string(r.offered) +
                                             " bytes, buffer of " + std::to_string(r.length));
      }
      complete_later(std::move(r.done), status, r.length);
      --p.open_ops;
      rendezvous_.erase(it);
    }
  } else {
    on_message(peer, srq_->buffer(index), wc.byte_len);
  }
  srq_->release(index);
  pump(peer);
}

void VerbsChannel::on_message(int peer, const std::byte* bytes, size_t size) {
  auto header = wire::parse_message(bytes, size);
  if (!header || header->source != static_cast<uint32_t>(peer)) {
    IBCOLL_LOG(warn, "dropped a malformed message of " << size << " bytes from peer " << peer);
    return;
  }
  Peer& p = peers_[static_cast<size_t>(peer)];
  p.send_credits += header->credits;
  if (is_credited(header->type)) ++p.credits_to_return;
  const std::byte* body = bytes + kHeader;

  switch (header->type) {
    case wire::Type::eager:
      if (auto posted = matches_.take_posted({peer, header->tag})) {
        --p.open_ops;
        deliver_eager(peer, *posted, body, header->length);
      } else {
        matches_.add_unexpected(
            {peer, header->tag},
            Arrival{wire::Type::eager, std::vector<std::byte>(body, body + header->length)});
      }
      break;
    case wire::Type::rts: {
      wire::RendezvousRequest request;
      std::memcpy(&request, body, sizeof(request));
      if (auto posted = matches_.take_posted({peer, header->tag})) {
        --p.open_ops;
        start_rendezvous_recv(peer, std::move(*posted), request.send_id, header->length);
      } else {
        matches_.add_unexpected({peer, header->tag},
                                Arrival{wire::Type::rts, {}, request.send_id, header->length});
      }
      break;
    }
    case wire::Type::cts: {
      wire::ReadyToReceive ready;
      std::memcpy(&ready, body, sizeof(ready));
      auto it = sends_.find(ready.send_id);
      if (it == sends_.end() || it->second.peer != peer || ready.length > it->second.length) {
        IBCOLL_LOG(warn, "dropped a rendezvous reply for an unknown send from peer " << peer);
        break;
      }
      it->second.target = ready;
      p.outgoing.push_back({wire::Type::cts, ready.send_id, true});
      break;
    }
    default:
      break;  // credit, ready, keepalive: their effect is above
  }
}

void VerbsChannel::deliver_eager(int peer, PostedRecv& recv, const std::byte* payload,
                                 size_t length) {
  const size_t n = std::min(length, recv.capacity);
  if (n > 0) std::memcpy(recv.buffer, payload, n);
  counters_.bytes_received += n;
  Status status;
  if (length > recv.capacity) {
    status = Status(Code::truncated, "recv from peer " + std::to_string(peer) + ": message of " +
                                         std::to_string(length) + " bytes, buffer of " +
                                         std::to_string(recv.capacity));
  }
  complete_later(std::move(recv.done), status, n);
}

void VerbsChannel::start_rendezvous_recv(int peer, PostedRecv recv, uint32_t send_id,
                                         uint64_t offered) {
  const size_t length = static_cast<size_t>(std::min<uint64_t>(recv.capacity, offered));
  RegistrationCache::Entry* registration = nullptr;
  try {
    if (length > 0) registration = registrations_->acquire(recv.buffer, length);
  } catch (const Error& e) {
    return complete_later(std::move(recv.done), e.status(), 0);
  }
  const uint32_t id = new_id();
  rendezvous_.emplace(id, RendezvousRecv{peer, recv.buffer, length, offered, send_id,
                                         std::move(recv.done), registration});
  Peer& p = peers_[static_cast<size_t>(peer)];
  ++p.open_ops;
  p.outgoing.push_back({wire::Type::cts, id});
  pump(peer);
}

void VerbsChannel::on_send_done(const ibv_wc& wc) {
  const auto index = static_cast<uint32_t>(work_index(wc.wr_id));
  const SendSlot slot = slots_[index];
  free_slots_.push_back(index);
  --cq_in_flight_;
  Peer& p = peers_[static_cast<size_t>(slot.peer)];
  --p.in_flight;
  if (wc.status != IBV_WC_SUCCESS)
    return fail_peer(slot.peer, completion_error(wc, slot.peer, "send"));
  if (slot.probe) p.probe_outstanding = false;  // the peer's QP acknowledged: it is alive
  if (slot.op != 0) {
    if (auto it = sends_.find(slot.op); it != sends_.end()) {
      complete_later(std::move(it->second.done), Status(), it->second.length);
      --p.open_ops;
      sends_.erase(it);
    }
  }
  pump(slot.peer);
}

void VerbsChannel::on_write_done(const ibv_wc& wc) {
  --cq_in_flight_;
  auto it = sends_.find(static_cast<uint32_t>(work_index(wc.wr_id)));
  if (it == sends_.end()) return;  // its peer failed meanwhile
  SendOp& op = it->second;
  const int peer = op.peer;
  Peer& p = peers_[static_cast<size_t>(peer)];
  p.in_flight -= op.write_chunks;
  if (wc.status != IBV_WC_SUCCESS) return fail_peer(peer, completion_error(wc, peer, "RDMA write"));
  if (op.registration) registrations_->release(op.registration);
  complete_later(std::move(op.done), Status(), op.length);
  --p.open_ops;
  sends_.erase(it);
  pump(peer);
}

void VerbsChannel::on_connected(int peer, bool announce) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  p.connected = true;
  p.announce = announce;
  p.send_credits = connector_->granted_credits(peer);
  p.max_send_wr = std::min(connector_->caps(peer).max_send_wr, kSendDepthPerPeer);
  p.last_heard = now_ = Clock::now();
  pump(peer);
}

bool VerbsChannel::has_room(int peer, uint32_t wrs) const {
  const Peer& p = peers_[static_cast<size_t>(peer)];
  return p.in_flight + wrs <= p.max_send_wr && cq_in_flight_ < cq_budget_;
}

void VerbsChannel::pump(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.connected || p.failed) return;
  if (p.announce) {
    if (!post_control(peer, wire::Type::ready)) return;
    p.announce = false;
  }
  while (!p.outgoing.empty() && post_outgoing(peer, p.outgoing.front()))
    p.outgoing.pop_front();
  if (p.failed) return;
  if (p.credits_to_return >= std::max(1u, credits_granted_ / 2) &&
      post_control(peer, wire::Type::credit)) {
    ++counters_.credit_messages;
  }
  if (p.keepalive && post_control(peer, wire::Type::keepalive)) {
    p.keepalive = false;
    p.probe_outstanding = true;
    p.probe_sent = now_;
    ++counters_.keepalives_sent;
  }
}

bool VerbsChannel::post_outgoing(int peer, const Outgoing& item) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.send_credits == 0) {
    ++counters_.credit_stalls;
    return false;
  }
  wire::MessageHeader header;
  if (item.rdma_write) {
    auto it = sends_.find(item.id);
    if (it == sends_.end()) return true;
    SendOp& op = it->second;
    const size_t length = op.target.length;
    const size_t chunk = device_->max_message_size();
    const auto chunks = static_cast<uint32_t>(std::max<size_t>(1, (length + chunk - 1) / chunk));
    if (!has_room(peer, chunks)) {
      starved_ |= cq_in_flight_ >= cq_budget_;
      return false;
    }
    try {
      if (length > 0 && !op.registration) {
        op.registration = registrations_->acquire(op.data, length);
      }
    } catch (const Error& e) {
      fail_peer(peer, e.status());
      return false;
    }
    std::vector<ibv_sge> sges(chunks);
    std::vector<ibv_send_wr> wrs(chunks);
    for (uint32_t i = 0; i < chunks; ++i) {
      const size_t offset = size_t{i} * chunk;
      const size_t bytes = std::min(chunk, length - std::min(length, offset));
      sges[i] = {reinterpret_cast<uint64_t>(op.data + offset), static_cast<uint32_t>(bytes),
                 op.registration ? op.registration->mr->lkey : 0};
      wrs[i].wr_id = make_work_id(WorkKind::rdma_write, item.id);
      wrs[i].sg_list = bytes > 0 ? &sges[i] : nullptr;
      wrs[i].num_sge = bytes > 0 ? 1 : 0;
      wrs[i].opcode = i + 1 == chunks ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
      wrs[i].send_flags = i + 1 == chunks ? IBV_SEND_SIGNALED : 0;
      wrs[i].imm_data = htonl(op.target.recv_id);
      wrs[i].wr.rdma.remote_addr = op.target.address + offset;
      wrs[i].wr.rdma.rkey = op.target.rkey;
      wrs[i].next = i + 1 < chunks ? &wrs[i + 1] : nullptr;
    }
    ibv_send_wr* bad = nullptr;
    if (int rc = ibv_post_send(connector_->queue_pair(peer), wrs.data(), &bad)) {
      fail_peer(peer,
                Status(Code::system_error, "ibv_post_send (RDMA write) to peer " +
                                               std::to_string(peer) + ": " + std::strerror(rc)));
      return false;
    }
    op.write_chunks = chunks;
    p.in_flight += chunks;
    ++cq_in_flight_;
    --p.send_credits;
    counters_.bytes_sent += length;
    return true;
  }
  bool posted = false;
  if (item.type == wire::Type::cts) {
    auto it = rendezvous_.find(item.id);
    if (it == rendezvous_.end()) return true;
    const RendezvousRecv& r = it->second;
    wire::ReadyToReceive ready{r.send_id,
                               item.id,
                               reinterpret_cast<uint64_t>(r.buffer),
                               r.length,
                               r.registration ? r.registration->mr->rkey : 0,
                               0};
    header.type = wire::Type::cts;
    posted = post_message(peer, header, &ready, sizeof(ready), nullptr, 0, 0);
  } else {
    auto it = sends_.find(item.id);
    if (it == sends_.end()) return true;
    const SendOp& op = it->second;
    header.type = item.type;
    header.tag = op.tag;
    header.length = op.length;
    if (item.type == wire::Type::eager) {
      posted = post_message(peer, header, nullptr, 0, op.data, op.length, item.id);
    } else {
      wire::RendezvousRequest request{item.id, 0};
      posted = post_message(peer, header, &request, sizeof(request), nullptr, 0, 0);
      counters_.rendezvous_sent += posted;
    }
  }
  if (posted) --p.send_credits;
  return posted;
}

bool VerbsChannel::post_control(int peer, wire::Type type) {
  wire::MessageHeader header;
  header.type = type;
  return post_message(peer, header, nullptr, 0, nullptr, 0, 0);
}

bool VerbsChannel::post_message(int peer, const wire::MessageHeader& header, const void* body,
                                size_t body_size, const void* payload, size_t payload_size,
                                uint32_t op) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (free_slots_.empty() || !has_room(peer, 1)) {
    starved_ |= free_slots_.empty() || cq_in_flight_ >= cq_budget_;
    return false;
  }
  const uint32_t slot = free_slots_.back();
  std::byte* bytes = send_slab_.get() + size_t{slot} * slot_size_;
  wire::MessageHeader h = header;
  h.source = static_cast<uint32_t>(rank_);
  h.credits = p.credits_to_return;
  std::memcpy(bytes, &h, kHeader);
  if (body_size) std::memcpy(bytes + kHeader, body, body_size);
  if (payload_size) std::memcpy(bytes + kHeader + body_size, payload, payload_size);
  const size_t total = kHeader + body_size + payload_size;

  ibv_qp* qp = connector_->queue_pair(peer);
  ibv_sge sge{reinterpret_cast<uint64_t>(bytes), static_cast<uint32_t>(total), send_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_work_id(WorkKind::send, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.send_flags =
      IBV_SEND_SIGNALED | (total <= connector_->caps(peer).max_inline_data ? IBV_SEND_INLINE : 0);
  ibv_send_wr* bad = nullptr;
  if (int rc = ibv_post_send(qp, &wr, &bad)) {
    fail_peer(peer, Status(Code::system_error, "ibv_post_send to peer " + std::to_string(peer) +
                                                   ": " + std::strerror(rc)));
    return false;
  }
  free_slots_.pop_back();
  slots_[slot] = {peer, op, h.type == wire::Type::keepalive};
  p.credits_to_return = 0;
  ++p.in_flight;
  ++cq_in_flight_;
  ++counters_.messages_sent;
  counters_.bytes_sent += payload_size;
  return true;
}

void VerbsChannel::fail_peer(int peer, const Status& status) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return;
  p.failed = true;
  p.failure = status;
  p.outgoing.clear();
  p.open_ops = 0;
  connector_->forget(peer);
  ++counters_.failed_peers;
  IBCOLL_LOG(warn, "peer " << peer << " failed: " << status.message());
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (it->second.peer != peer) {
      ++it;
      continue;
    }
    if (it->second.registration) registrations_->release(it->second.registration);
    complete_later(std::move(it->second.done), status, 0);
    it = sends_.erase(it);
  }
  for (auto it = rendezvous_.begin(); it != rendezvous_.end();) {
    if (it->second.peer != peer) {
      ++it;
      continue;
    }
    if (it->second.registration) registrations_->release(it->second.registration);
    complete_later(std::move(it->second.done), status, 0);
    it = rendezvous_.erase(it);
  }
  matches_.fail_peer(peer, [&](PostedRecv& r) { complete_later(std::move(r.done), status, 0); });
}

void VerbsChannel::complete_later(Completion done, Status status, size_t bytes) {
  deferred_.emplace_back(std::move(done), std::move(status), bytes);
}

void VerbsChannel::on_tick(Clock::time_point now) {
  connector_->tick(now);
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (!p.connected || p.failed || p.open_ops == 0) continue;
    if (p.probe_outstanding) {
      // A live peer's QP acknowledges at once, whatever its process is doing. Hardware fails
      // an unacknowledged send after its retries; Soft-RoCE may never do so, hence this check.
      if (now - p.probe_sent >= kUnansweredProbes * options_.keepalive) {
        fail_peer(peer,
                  Status(Code::peer_failed,
                         "peer " + std::to_string(peer) + " stopped acknowledging (no " +
                             "answer to a keepalive in " +
                             std::to_string((kUnansweredProbes * options_.keepalive).count()) +
                             " ms, IBCOLL_KEEPALIVE)"));
      }
      continue;
    }
    if (now - p.last_heard >= options_.keepalive && now - p.last_keepalive >= options_.keepalive) {
      // Sending is how a dead peer shows: the RC transport retries, then fails the send.
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
        if (int peer = connector_->peer_of_qp(event.element.qp->qp_num); peer >= 0) {
          fail_peer(peer, Status(Code::peer_failed,
                                 "connection to peer " + std::to_string(peer) + ": " + what));
        }
        break;
      case IBV_EVENT_PORT_ERR:
      case IBV_EVENT_DEVICE_FATAL:
        for (int peer = 0; peer < size_; ++peer) {
          if (peer != rank_) {
            fail_peer(peer, Status(Code::peer_failed, device_->name() + ": " + what));
          }
        }
        break;
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
  c.registration_hits = registrations_->stats().hits;
  c.registration_misses = registrations_->stats().misses;
  return c;
}

}  // namespace ibcoll::transport::verbs
