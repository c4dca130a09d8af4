// VerbsChannel, receive side: what arrives in the SRQ, matching, eager delivery and the
// receiver's half of rendezvous.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "transport/verbs/verbs_channel.h"
#include "transport/verbs/work_id.h"

namespace ibcoll::transport::verbs {
namespace {

// Messages that occupy one of the credits their sender was granted.
bool is_credited(wire::Type type) {
  return type == wire::Type::eager || type == wire::Type::eager_more || type == wire::Type::rts ||
         type == wire::Type::cts;
}

}  // namespace

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
  Peer& p = peers_[peer];
  p.last_heard = now_;
  ++counters_.messages_received;
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
    credits_home_.push_back(peer);
    auto it = rendezvous_.find(ntohl(wc.imm_data));
    if (it != rendezvous_.end() && it->second.peer == peer && !it->second.refused) {
      RendezvousRecv& r = it->second;
      r.received += wc.byte_len;
      if (r.received > r.length) {
        srq_->release(index);
        return fail_peer(
            peer, Status(Code::peer_failed,
                         "peer " + std::to_string(peer) + " wrote " + std::to_string(r.received) +
                             " bytes into a receive of " + std::to_string(r.length)));
      }
      if (r.received == r.length) {
        if (r.registration) registrations_->release(r.registration);
        counters_.bytes_received += r.length;
        completions_.add(std::move(r.done), receive_status(peer, r.offered, r.length), r.length);
        --p.open_ops;
        rendezvous_.erase(it);
      }
    }
  } else {
    on_message(peer, srq_->buffer(index), wc.byte_len);
  }
  srq_->release(index);
  pump(peer);
}

// One of the peer's credited messages was consumed, and its buffer is posted again: its credit
// goes back to the peer, or to the ledger's pool (and on to peers waiting for one).
void VerbsChannel::credit_came_home(int peer) {
  if (credits_.came_home(peer, now_)) {
    ++peers_[peer].credits_to_return;
    ++credits_owed_;
  } else {
    tell_credit_notices();
  }
}

// Out: lent, less what is owed back here and what this poll consumed and has not counted yet
// (a handshake may grant credits while a poll handles its completions).
void VerbsChannel::check_credits_backed() {
  const uint64_t out = credits_.lent_in_all() - credits_owed_ - credits_home_.size();
  if (out > srq_->posted()) ++counters_.credit_overdrafts;
}

void VerbsChannel::on_message(int peer, const std::byte* bytes, size_t size) {
  auto header = wire::parse_message(bytes, size);
  if (!header || header->source != static_cast<uint32_t>(peer)) {
    IBCOLL_LOG(warn, "dropped a malformed message of " << size << " bytes from peer " << peer);
    return;
  }
  Peer& p = peers_[peer];
  p.send_credits += header->credits;
  if (is_credited(header->type)) credits_home_.push_back(peer);
  const std::byte* body = bytes + kHeaderBytes;

  switch (header->type) {
    case wire::Type::eager:
      if (p.assembly) {  // the parts of one message come back to back: this peer is broken
        return fail_peer(
            peer, Status(Code::peer_failed, "peer " + std::to_string(peer) +
                                                " began a message before finishing its last one"));
      }
      if (header->more > 0) {
        start_assembly(peer, header->tag, header->length + header->more);
        add_part(peer, body, header->length);
      } else if (auto posted = matches_.take_posted({peer, header->tag})) {
        --p.open_ops;
        deliver_eager(peer, *posted, body, header->length);
      } else if (!withdrawn_tags_.contains(header->tag)) {
        PooledBytes payload(early_arrivals_, header->length);
        if (header->length) std::memcpy(payload.data(), body, header->length);
        matches_.add_unexpected({peer, header->tag},
                                Arrival{wire::Type::eager, std::move(payload)});
      }
      break;
    case wire::Type::eager_more:
      if (!p.assembly) {  // its message was cut off (withdrawn, or the peer failed)
        IBCOLL_LOG(warn, "dropped a part of an eager message from peer "
                             << peer << " that began no message");
        break;
      }
      if (const size_t left = p.assembly->total - p.assembly->received;
          left != header->length + header->more) {
        return fail_peer(
            peer, Status(Code::peer_failed, "peer " + std::to_string(peer) + " sent a part of " +
                                                std::to_string(header->length) + " bytes with " +
                                                std::to_string(header->more) +
                                                " more to come where its message had " +
                                                std::to_string(left) + " bytes left"));
      }
      add_part(peer, body, header->length);
      break;
    case wire::Type::rts: {
      wire::RendezvousRequest request;
      std::memcpy(&request, body, sizeof(request));
      if (auto posted = matches_.take_posted({peer, header->tag})) {
        --p.open_ops;
        start_rendezvous_recv(peer, std::move(*posted), header->tag, request.send_id,
                              header->length);
      } else if (withdrawn_tags_.contains(header->tag)) {
        refuse_withdrawn(peer, header->tag, request.send_id);
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
        // A send withdrawn here meanwhile; the receiver has heard of it, or will.
        IBCOLL_LOG(debug, "dropped a rendezvous reply for an unknown send from peer " << peer);
        break;
      }
      if (ready.recv_id == 0) {  // refused
        completions_.add(std::move(it->second.done),
                         ready.refusal == wire::Refusal::withdrawn
                             ? withdrawn(peer, "receiver")
                             : Status(Code::system_error, "send to peer " + std::to_string(peer) +
                                                              ": the receiver could not register "
                                                              "its buffer (see its log)"),
                         0);
        --p.open_ops;
        sends_.erase(it);
        break;
      }
      it->second.target = ready;
      p.outgoing.push_back({Outgoing::Step::rdma_write, ready.send_id});
      break;
    }
    case wire::Type::send_withdrawn:
      on_send_withdrawn(peer, header->tag, static_cast<uint32_t>(header->length));
      break;
    case wire::Type::receive_withdrawn:
      on_receive_withdrawn(peer, static_cast<uint32_t>(header->length));
      break;
    case wire::Type::credit_recall: {  // what is unused goes back; what is in flight comes home
      const auto unused = static_cast<uint32_t>(std::min<uint64_t>(header->length, p.send_credits));
      p.send_credits -= unused;
      p.credits_to_give_back += unused;
      p.give_back_due = true;
      break;
    }
    case wire::Type::credit_given_back:
      credits_.given_back(peer,
                          static_cast<uint32_t>(std::min<uint64_t>(header->length, UINT32_MAX)));
      tell_credit_notices();
      break;
    case wire::Type::notice:
      if (const std::optional<Notice> notice = Notice::unpacked(header->tag, header->length);
          notice && observer_) {
        observer_->heard(*this, peer, *notice);
      }
      break;
    default:
      break;  // credit, ready: their effect is above
  }
}

void VerbsChannel::deliver_eager(int peer, PostedRecv& recv, const std::byte* payload,
                                 size_t length) {
  const size_t n = std::min(length, recv.capacity);
  if (n > 0) std::memcpy(recv.buffer, payload, n);
  counters_.bytes_received += n;
  completions_.add(std::move(recv.done), receive_status(peer, length, recv.capacity), n);
}

// The first part of an eager message in parts takes a posted receive at once, as a whole
// message would; the receive stays open (on the peer) until the last part is in.
void VerbsChannel::start_assembly(int peer, uint64_t tag, size_t total) {
  Peer& p = peers_[peer];
  Assembly& a = p.assembly.emplace(Assembly{tag, total, 0, std::nullopt, {}});
  a.posted = matches_.take_posted({peer, tag});
  if (a.posted) return;
  a.dropped = withdrawn_tags_.contains(tag);
  if (!a.dropped) a.held = PooledBytes(early_arrivals_, total);
}

void VerbsChannel::add_part(int peer, const std::byte* part, size_t length) {
  Peer& p = peers_[peer];
  Assembly& a = *p.assembly;
  if (a.posted && a.received < a.posted->capacity) {
    std::memcpy(a.posted->buffer + a.received, part,
                std::min(length, a.posted->capacity - a.received));
  } else if (!a.posted && !a.dropped) {
    std::memcpy(a.held.data() + a.received, part, length);
  }
  a.received += length;
  if (a.received < a.total) return;
  if (a.posted) {
    --p.open_ops;
    const size_t delivered = std::min(a.total, a.posted->capacity);
    counters_.bytes_received += delivered;
    completions_.add(std::move(a.posted->done), receive_status(peer, a.total, a.posted->capacity),
                     delivered);
  } else if (!a.dropped) {  // a receive may have been posted while the parts came in
    if (auto posted = matches_.take_posted({peer, a.tag})) {
      --p.open_ops;
      deliver_eager(peer, *posted, a.held.data(), a.total);
    } else {
      matches_.add_unexpected({peer, a.tag}, Arrival{wire::Type::eager, std::move(a.held)});
    }
  }
  p.assembly.reset();
}

void VerbsChannel::start_rendezvous_recv(int peer, PostedRecv recv, uint64_t tag, uint32_t send_id,
                                         uint64_t offered) {
  const size_t length = static_cast<size_t>(std::min<uint64_t>(recv.capacity, offered));
  RegistrationCache::Entry* registration = nullptr;
  bool refused = false;
  try {
    if (length > 0)
      registration = registrations_->acquire(recv.buffer, length, Access::peer_writes);
  } catch (const Error& e) {
    // The receive fails here; the answer still goes out, refusing, so the sender fails too.
    IBCOLL_LOG(warn, "receive from peer " << peer << " refused: " << e.what());
    completions_.add(std::move(recv.done), e.status(), 0);
    refused = true;
  }
  const uint32_t id = new_id();
  rendezvous_.emplace(
      id, RendezvousRecv{peer, tag, recv.buffer, length, offered, send_id, std::move(recv.done),
                         registration, refused, wire::Refusal::unregistrable, false, 0});
  Peer& p = peers_[peer];
  ++p.open_ops;
  p.outgoing.push_back({Outgoing::Step::rendezvous_reply, id});
  pump(peer);
}

void VerbsChannel::refuse_withdrawn(int peer, uint64_t tag, uint32_t send_id) {
  const uint32_t id = new_id();
  rendezvous_.emplace(id, RendezvousRecv{peer,
                                         tag,
                                         nullptr,
                                         0,
                                         0,
                                         send_id,
                                         {},
                                         nullptr,
                                         true,
                                         wire::Refusal::withdrawn,
                                         false,
                                         0});
  ++peers_[peer].open_ops;
  peers_[peer].outgoing.push_back({Outgoing::Step::rendezvous_reply, id});
}

}  // namespace ibcoll::transport::verbs
