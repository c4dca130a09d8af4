// VerbsChannel, send side: each peer's ordered queue, credits, send slots and CQ room, and
// posting messages and RDMA writes.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "transport/verbs/verbs_channel.h"
#include "transport/verbs/work_id.h"

namespace ibcoll::transport::verbs {

bool VerbsChannel::has_room(int peer, uint32_t wrs) const {
  const Peer* p = peers_.find(peer);
  return p && p->queue && p->queue->in_flight + wrs <= p->queue->max_send_wr &&
         cq_in_flight_ + wrs <= cq_budget_;
}

void VerbsChannel::pump(int peer) {
  Peer& p = peers_[peer];
  if (!p.connected || p.failed) return;
  // While a poll handles completions, credits wait: the peer is pumped again after it.
  if (p.credits_to_return > 0 && holding_credits_) owed_while_holding_.push_back(peer);
  if (p.announce) {
    if (!post_control(peer, wire::Type::ready)) return;
    p.announce = false;
  }
  // Withdrawals first, and nothing after one not yet posted: a message cut between its parts
  // must be known cut before the peer's next message begins.
  while (!p.news.empty()) {
    const News& n = p.news.front();
    wire::MessageHeader header;
    header.type = n.type;
    header.tag = n.tag;
    header.length = n.length;
    if (!post_message(peer, header, nullptr, 0, nullptr, 0)) return;
    p.news.pop_front();
  }
  while (!p.outgoing.empty() && post_outgoing(peer, p.outgoing.front()))
    p.outgoing.pop_front();
  if (p.failed) return;
  // Credits go back once half of what the peer was lent waits here: at once for one lent
  // little (a turn from the pool), in batches for one lent many.
  if (p.credits_to_return > 0 && !holding_credits_ &&
      p.credits_to_return * 2 >= credits_.lent(peer) && post_control(peer, wire::Type::credit)) {
    ++counters_.credit_messages;
  }
  if (p.credits_to_recall > 0 &&
      post_control(peer, wire::Type::credit_recall, p.credits_to_recall)) {
    p.credits_to_recall = 0;
    ++counters_.credit_recalls;
  }
  if (p.give_back_due &&
      post_control(peer, wire::Type::credit_given_back, p.credits_to_give_back)) {
    p.credits_to_give_back = 0;
    p.give_back_due = false;
  }
  if (p.keepalive && post_probe(peer)) {
    p.keepalive = false;
    p.probe_outstanding = true;
    p.probe_sent = now_;
    ++counters_.keepalives_sent;
  }
}

bool VerbsChannel::post_outgoing(int peer, const Outgoing& item) {
  Peer& p = peers_[peer];
  if (p.send_credits == 0) {
    ++counters_.credit_stalls;
    return false;
  }
  if (item.step == Outgoing::Step::rdma_write) return post_rdma_write(peer, item.id);
  wire::MessageHeader header;
  bool posted = false;
  if (item.step == Outgoing::Step::rendezvous_reply) {
    auto it = rendezvous_.find(item.id);
    if (it == rendezvous_.end()) return true;
    RendezvousRecv& r = it->second;
    wire::ReadyToReceive ready{r.send_id,
                               r.refused ? 0 : item.id,
                               reinterpret_cast<uint64_t>(r.buffer),
                               r.length,
                               r.registration ? r.registration->mr->rkey : 0,
                               r.refusal};
    header.type = wire::Type::cts;
    posted = post_message(peer, header, &ready, sizeof(ready), nullptr, 0);
    if (p.failed) return false;  // failing the peer took `r` with it
    r.answered = posted;
    if (posted && r.refused) {
      --p.open_ops;
      rendezvous_.erase(it);
    }
  } else {
    auto it = sends_.find(item.id);
    if (it == sends_.end()) return true;
    if (item.step == Outgoing::Step::eager) return post_eager_parts(peer, it);
    SendOp& op = it->second;
    header.type = wire::Type::rts;
    header.tag = op.tag;
    header.length = op.length;
    wire::RendezvousRequest request{item.id, 0};
    posted = post_message(peer, header, &request, sizeof(request), nullptr, 0);
    if (p.failed) return false;  // failing the peer took `op` with it
    op.request_posted = posted;
    counters_.rendezvous_sent += posted;
  }
  if (posted) --p.send_credits;
  return posted;
}

// One part of an eager message, of at most one buffer, from `offset` of the message's `length`
// bytes (advanced past it once posted): the first is `eager` and the rest `eager_more`, each
// saying how much is still to come. The payload is copied into a send slot, so once the last
// part is posted the caller's buffer is free and the send is complete. A later transport error
// fails the peer, and with it whatever still waits on it.
bool VerbsChannel::post_eager_part(int peer, uint64_t tag, const std::byte* data, size_t length,
                                   size_t& offset) {
  Peer& p = peers_[peer];
  if (p.send_credits == 0) {
    ++counters_.credit_stalls;
    return false;
  }
  const size_t part = std::min(options_.eager_buffer, length - offset);
  wire::MessageHeader header;
  header.type = offset == 0 ? wire::Type::eager : wire::Type::eager_more;
  header.tag = tag;
  header.length = part;
  header.more = static_cast<uint32_t>(length - offset - part);
  if (!post_message(peer, header, nullptr, 0, data + offset, part)) return false;
  --p.send_credits;
  offset += part;
  return true;
}

// The parts go back to back: the message stays at the head of the peer's queue until its last
// part is posted, so the receiver adds every `eager_more` to the message this peer began last.
bool VerbsChannel::post_eager_parts(int peer, Sends::iterator send) {
  SendOp& op = send->second;
  do {
    if (!post_eager_part(peer, op.tag, op.data, op.length, op.sent)) return false;
  } while (op.sent < op.length);
  completions_.add(std::move(op.done), Status(), op.length);
  --peers_[peer].open_ops;
  sends_.erase(send);
  return true;
}

// The rendezvous data: RDMA writes (chunks of at most kWriteChunkBytes, each signaled) into the
// buffer the receiver announced, each with the receiver's id as immediate data, so the receiver
// adds up what came and completes at exactly its length. Each chunk takes a credit. Chunks go
// one after another while credits and room last, up to kWritesInFlight of one send, so the
// link stays busy while a completion is on its way, and credit returns, probes and other peers'
// sends still find room; each completion shows the peer alive to the keepalive check. The
// write stays at the head of the peer's queue until its last chunk is posted. True once it is.
bool VerbsChannel::post_rdma_write(int peer, uint32_t id) {
  for (;;) {
    const Chunk chunk = post_write_chunk(peer, id);
    if (chunk != Chunk::more) return chunk == Chunk::last;
  }
}

VerbsChannel::Chunk VerbsChannel::post_write_chunk(int peer, uint32_t id) {
  Peer& p = peers_[peer];
  auto it = sends_.find(id);
  if (it == sends_.end() || !it->second.done || !it->second.cut.ok()) {
    return Chunk::last;  // ended, or withdrawn (here or by the receiver): no more
  }
  SendOp& op = it->second;
  const size_t length = op.target.length;
  const size_t chunk = std::min<size_t>(device_->max_message_size(), kWriteChunkBytes);
  op.chunks = static_cast<uint32_t>(std::max<size_t>(1, (length + chunk - 1) / chunk));
  SendQueue& queue = *p.queue;
  if (op.chunks_in_flight >= kWritesInFlight) return Chunk::none;  // its completion pumps
  if (p.send_credits == 0) {
    ++counters_.credit_stalls;
    return Chunk::none;
  }
  if (!has_room(peer, 1)) {
    starved_ |= cq_in_flight_ >= cq_budget_;
    return Chunk::none;
  }
  try {
    if (length > 0 && !op.registration) {
      op.registration = registrations_->acquire(op.data, length, Access::device_reads);
    }
  } catch (const Error& e) {
    fail_peer(peer, e.status());
    return Chunk::none;
  }
  const bool last = op.chunks_posted + 1 == op.chunks;
  const size_t offset = size_t{op.chunks_posted} * chunk;
  const size_t bytes = std::min(chunk, length - std::min(length, offset));
  ibv_sge sge{reinterpret_cast<uint64_t>(op.data + offset), static_cast<uint32_t>(bytes),
              op.registration ? op.registration->mr->lkey : 0};
  ibv_send_wr wr{};
  wr.wr_id = make_work_id(WorkKind::rdma_write, id | (last ? kLastChunk : 0));
  wr.sg_list = bytes > 0 ? &sge : nullptr;
  wr.num_sge = bytes > 0 ? 1 : 0;
  wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.imm_data = htonl(op.target.recv_id);
  wr.wr.rdma.remote_addr = op.target.address + offset;
  wr.wr.rdma.rkey = op.target.rkey;
  wr.qp_type.xrc.remote_srqn = p.remote_srq_num;
  if (!post_on(queue, peer, wr, "RDMA write")) return Chunk::none;
  queue.unacked.push_back({wr.wr_id, true});
  ++op.chunks_posted;
  ++op.chunks_in_flight;
  ++queue.in_flight;
  ++cq_in_flight_;
  --p.send_credits;
  counters_.bytes_sent += bytes;
  return last ? Chunk::last : Chunk::more;
}

// Sends are signaled one in kSignalEvery, so most cost no completion at all; everything is while
// unsignaled sends hold too many slots: slots of a QP that goes quiet stay held until its next
// signaled one.
bool VerbsChannel::should_signal(SendQueue& queue) {
  if (++queue.unsignaled_run >= kSignalEvery || unsignaled_ >= kSendSlots / 2 ||
      free_slots_.size() < kSendSlots / 4) {
    queue.unsignaled_run = 0;
    return true;
  }
  return false;
}

// Completions arrive in posting order per QP, so one completion for `work_id` means every
// work request posted on that QP before it is done too.
void VerbsChannel::retire_through(SendQueue& queue, uint64_t work_id) {
  auto found = std::find_if(queue.unacked.begin(), queue.unacked.end(),
                            [&](const Unacked& u) { return u.work_id == work_id; });
  if (found == queue.unacked.end()) return;
  for (auto retired = std::distance(queue.unacked.begin(), found) + 1; retired > 0; --retired) {
    const Unacked& u = queue.unacked.front();
    if (work_kind(u.work_id) == WorkKind::send) {
      free_slots_.push_back(static_cast<uint32_t>(work_index(u.work_id)));
    }
    unsignaled_ -= !u.signaled;
    --queue.in_flight;
    --cq_in_flight_;
    queue.unacked.pop_front();
  }
}

bool VerbsChannel::post_on(SendQueue& queue, int peer, ibv_send_wr& wr, const char* what) {
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(queue.qp, &wr, &bad);
  if (rc == 0) {
    if (++posted_ == options_.error_qp_after) {
      IBCOLL_LOG(warn, "IBCOLL_FAULT: the QP of work request " << posted_ << " (" << what
                                                               << " to peer " << peer
                                                               << ") goes into error");
      move_to_error(queue.qp);
    }
    return true;
  }
  fail_peer(peer, Status(Code::system_error, std::string("ibv_post_send (") + what + ") to peer " +
                                                 std::to_string(peer) + ": " + std::strerror(rc)));
  return false;
}

// A keepalive is a signaled RDMA write of no bytes: the peer's port acknowledges it whatever the
// peer's process is doing (computing, stopped in a debugger), and it takes no receive buffer
// there, so it can neither meet an empty SRQ (whose RNR retries never end) nor eat a buffer a
// credit stands for; nor does it need a key or an address (a zero-length write checks neither:
// IB spec C9-88) or a send slot. A live peer whose process never polls stays alive.
bool VerbsChannel::post_probe(int peer) {
  Peer& p = peers_[peer];
  if (!has_room(peer, 1)) {
    starved_ |= cq_in_flight_ >= cq_budget_;
    return false;
  }
  SendQueue& queue = *p.queue;
  ibv_send_wr wr{};
  wr.wr_id = make_work_id(WorkKind::probe, static_cast<uint64_t>(peer));
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.qp_type.xrc.remote_srqn = p.remote_srq_num;
  if (!post_on(queue, peer, wr, "keepalive")) return false;
  queue.unacked.push_back({wr.wr_id, true});
  queue.unsignaled_run = 0;
  ++queue.in_flight;
  ++cq_in_flight_;
  return true;
}

bool VerbsChannel::post_control(int peer, wire::Type type, uint64_t length) {
  wire::MessageHeader header;
  header.type = type;
  header.length = length;
  return post_message(peer, header, nullptr, 0, nullptr, 0);
}

bool VerbsChannel::post_message(int peer, const wire::MessageHeader& header, const void* body,
                                size_t body_size, const void* payload, size_t payload_size) {
  Peer& p = peers_[peer];
  if (free_slots_.empty() || !has_room(peer, 1)) {
    starved_ |= free_slots_.empty() || cq_in_flight_ >= cq_budget_;
    return false;
  }
  const uint32_t slot = free_slots_.back();
  std::byte* bytes = send_slab_.get() + size_t{slot} * slot_size_;
  wire::MessageHeader h = header;
  h.source = static_cast<uint32_t>(rank_);
  h.credits = holding_credits_ ? 0 : p.credits_to_return;
  std::memcpy(bytes, &h, kHeaderBytes);
  if (body_size) std::memcpy(bytes + kHeaderBytes, body, body_size);
  if (payload_size) std::memcpy(bytes + kHeaderBytes + body_size, payload, payload_size);
  const size_t total = kHeaderBytes + body_size + payload_size;

  SendQueue& queue = *p.queue;
  ibv_sge sge{reinterpret_cast<uint64_t>(bytes), static_cast<uint32_t>(total), send_mr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = make_work_id(WorkKind::send, slot);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_SEND;
  wr.qp_type.xrc.remote_srqn = p.remote_srq_num;
  const bool signaled = should_signal(queue);
  wr.send_flags = (signaled ? IBV_SEND_SIGNALED : 0) |
                  (total <= queue.caps.max_inline_data ? IBV_SEND_INLINE : 0);
  if (!post_on(queue, peer, wr, "message")) return false;
  free_slots_.pop_back();
  slots_[slot] = peer;
  queue.unacked.push_back({wr.wr_id, signaled});
  unsignaled_ += !signaled;
  if (h.credits > 0) {
    credits_owed_ -= std::exchange(p.credits_to_return, 0);
    check_credits_backed();
  }
  ++queue.in_flight;
  ++cq_in_flight_;
  ++counters_.messages_sent;
  counters_.bytes_sent += payload_size;
  return true;
}

}  // namespace ibcoll::transport::verbs
