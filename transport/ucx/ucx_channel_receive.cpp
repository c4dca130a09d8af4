// UcxChannel, receiving: posted receives, arriving active messages (from inside
// ucp_worker_progress: they match and record, and completions run later from poll()), and the
// rendezvous answer that lets a large message's data go.
#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "transport/ucx/ucx_channel.h"

namespace ibcoll::transport::ucx {
void UcxChannel::post_recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) {
  Peer& p = peer_entry(peer);
  if (p.failed) {
    completions_.add(std::move(done), p.failure, 0);
    return;
  }
  PostedRecv recv{static_cast<std::byte*>(buffer), capacity, std::move(done)};
  std::optional<Arrival> arrival = matches_.take_unexpected({peer, tag});
  if (!arrival) {
    matches_.add_posted({peer, tag}, std::move(recv));
    return;
  }
  if (arrival->type == UcxHeader::Type::request) {
    if (arrival->withdrawn) {
      completions_.add(std::move(recv.done), withdrawn(peer, "sender"), 0);
    } else {
      start_rendezvous_recv(peer, tag, std::move(recv), arrival->send_id, arrival->length);
    }
    return;
  }
  const size_t bytes = std::min(arrival->payload.size(), capacity);
  if (bytes) std::memcpy(recv.buffer, arrival->payload.data(), bytes);
  completions_.add(std::move(recv.done), receive_status(peer, arrival->payload.size(), capacity),
                   bytes);
}

void UcxChannel::start_rendezvous_recv(int peer, uint64_t tag, PostedRecv recv, uint32_t send_id,
                                       uint64_t offered) {
  const uint32_t id = new_id();
  RendezvousRecv& r = rendezvous_
                          .try_emplace(id, RendezvousRecv{.peer = peer,
                                                          .tag = tag,
                                                          .buffer = recv.buffer,
                                                          .capacity = recv.capacity,
                                                          .offered = offered,
                                                          .send_id = send_id,
                                                          .done = std::move(recv.done)})
                          .first->second;
  r.in_flight = {InFlight::Of::rendezvous_recv, this, id};
  send_control(peer, UcxHeader::Type::answer, tag, send_id, std::min<uint64_t>(offered, r.capacity),
               id);
}

ucs_status_t UcxChannel::on_message(void* arg, const void* header, size_t header_length, void* data,
                                    size_t length, const ucp_am_recv_param_t* param) {
  auto* self = static_cast<UcxChannel*>(arg);
  const std::optional<UcxHeader> parsed = parse_header(header, header_length);
  if (!parsed || parsed->source >= static_cast<uint32_t>(self->size_) ||
      static_cast<int>(parsed->source) == self->rank_) {
    IBCOLL_LOG(warn, "UCX: dropped an active message that is not ibcoll's (" << header_length
                                                                             << "-byte header)");
    return param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV ? UCS_ERR_INVALID_PARAM : UCS_OK;
  }
  const ucs_status_t status = self->receive(*parsed, data, length, *param);
  // UCX 1.13 asserts that only a rendezvous is refused (an error fails its sender's send): a
  // message dropped otherwise is dropped with UCS_OK.
  return param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV ? status : UCS_OK;
}

ucs_status_t UcxChannel::receive(const UcxHeader& header, void* data, size_t length,
                                 const ucp_am_recv_param_t& param) {
  const int peer = static_cast<int>(header.source);
  Peer& p = peer_entry(peer);
  if (p.failed) return UCS_ERR_CANCELED;  // nothing more is taken from a failed peer
  p.heard = true;
  const bool rendezvous = param.recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV;
  if (rendezvous && header.type != UcxHeader::Type::data) {
    reported_failures_.emplace_back(
        peer, Status(Code::internal, "UCX: peer " + std::to_string(peer) +
                                         " sent a small message by UCX's rendezvous"));
    return UCS_ERR_UNSUPPORTED;
  }
  switch (header.type) {
    case UcxHeader::Type::eager:
    case UcxHeader::Type::request:
      // UCX promises no order among active messages; ibcoll's matching needs its own.
      if (header.reply_id != p.next_sequence_in) {
        reported_failures_.emplace_back(
            peer,
            Status(Code::internal, "UCX delivered peer " + std::to_string(peer) + "'s message " +
                                       std::to_string(header.reply_id) + " where " +
                                       std::to_string(p.next_sequence_in) + " was next"));
        return UCS_ERR_CANCELED;
      }
      ++p.next_sequence_in;
      ++counters_.messages_received;
      counters_.bytes_received += header.length;
      if (header.type == UcxHeader::Type::eager) {
        on_eager(peer, header, data, length);
      } else {
        on_request(peer, header);
      }
      return UCS_OK;
    case UcxHeader::Type::answer:
      on_answer(peer, header);
      return UCS_OK;
    case UcxHeader::Type::data:
      return on_data(peer, header, data, length, param);
    case UcxHeader::Type::send_withdrawn:
      on_send_withdrawn(peer, header.id);
      return UCS_OK;
    case UcxHeader::Type::receive_withdrawn:
      on_receive_withdrawn(peer, header.id);
      return UCS_OK;
    case UcxHeader::Type::notice:
      if (const std::optional<Notice> notice = Notice::unpacked(header.tag, header.length))
        heard_.push_back({peer, *notice});
      return UCS_OK;
    case UcxHeader::Type::probe:
      return UCS_OK;
  }
  return UCS_ERR_INVALID_PARAM;
}

void UcxChannel::on_eager(int peer, const UcxHeader& header, const void* data, size_t length) {
  if (withdrawn_tags_.contains(header.tag)) return;
  if (std::optional<PostedRecv> posted = matches_.take_posted({peer, header.tag})) {
    const size_t bytes = std::min(length, posted->capacity);
    if (bytes) std::memcpy(posted->buffer, data, bytes);
    completions_.add(std::move(posted->done), receive_status(peer, length, posted->capacity),
                     bytes);
    return;
  }
  Arrival arrival;
  arrival.type = UcxHeader::Type::eager;
  arrival.payload = PooledBytes(payloads_, length);
  if (length) std::memcpy(arrival.payload.data(), data, length);
  matches_.add_unexpected({peer, header.tag}, std::move(arrival));
}

void UcxChannel::on_request(int peer, const UcxHeader& header) {
  if (withdrawn_tags_.contains(header.tag)) {  // refused: its sender stops waiting
    send_control(peer, UcxHeader::Type::answer, header.tag, header.id, 0, 0);
    return;
  }
  if (std::optional<PostedRecv> posted = matches_.take_posted({peer, header.tag})) {
    start_rendezvous_recv(peer, header.tag, std::move(*posted), header.id, header.length);
    return;
  }
  Arrival arrival;
  arrival.type = UcxHeader::Type::request;
  arrival.send_id = header.id;
  arrival.length = header.length;
  matches_.add_unexpected({peer, header.tag}, std::move(arrival));
}

void UcxChannel::on_answer(int peer, const UcxHeader& header) {
  auto it = sends_.find(header.id);
  if (it == sends_.end() || it->second.peer != peer || !it->second.asked) return;
  SendOp& op = it->second;
  op.asked = false;
  if (header.reply_id == 0) {
    end_send(header.id, withdrawn(peer, "receiver"));
    return;
  }
  // A header of its own: UCX may still hold the request's until that send completes.
  op.data_header = op.header;
  op.data_header.type = UcxHeader::Type::data;
  op.data_header.id = header.reply_id;
  op.data_header.length = std::min<uint64_t>(header.length, op.length);
  op.answered = true;
  if (!op.request) post_data(op);  // else once UCX is done with the request's header
}

void UcxChannel::post_data(SendOp& op) {
  op.answered = false;
  op.data_posted = true;
  ++counters_.rendezvous_sent;
  void* request = send_message(op.peer, op.data_header, op.in_flight, op.data,
                               static_cast<size_t>(op.data_header.length), true);
  if (UCS_PTR_IS_ERR(request)) return;  // fails with its peer
  if (!request) {
    end_send(op.in_flight.id, {});
    return;
  }
  op.request = request;
}

ucs_status_t UcxChannel::on_data(int peer, const UcxHeader& header, void* data, size_t length,
                                 const ucp_am_recv_param_t& param) {
  auto it = rendezvous_.find(header.id);
  // Withdrawn (or not ours): refused, which fails the sender's send.
  if (it == rendezvous_.end() || it->second.peer != peer || it->second.withdrawn) {
    return UCS_ERR_CANCELED;
  }
  RendezvousRecv& r = it->second;
  if (length > r.capacity) {
    end_rendezvous_recv(header.id,
                        Status(Code::internal, "UCX: peer " + std::to_string(peer) + " sent " +
                                                   std::to_string(length) + " bytes for " +
                                                   std::to_string(r.capacity) + " accepted"),
                        0);
    return UCS_ERR_MESSAGE_TRUNCATED;
  }
  if (!(param.recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV)) {  // UCX sent it eagerly after all
    if (length) std::memcpy(r.buffer, data, length);
    end_rendezvous_recv(header.id, receive_status(peer, r.offered, r.capacity), length);
    return UCS_OK;
  }
  ucp_request_param_t receive{};
  receive.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  receive.cb.recv_am = &UcxChannel::on_data_received;
  receive.user_data = &r.in_flight;
  void* request = ucp_am_recv_data_nbx(worker_.get(), data, r.buffer, length, &receive);
  if (UCS_PTR_IS_ERR(request)) {
    end_rendezvous_recv(
        header.id,
        Status(Code::peer_failed, std::string("UCX: receiving from peer ") + std::to_string(peer) +
                                      ": " + ucs_status_string(UCS_PTR_STATUS(request))),
        0);
  } else if (!request) {
    end_rendezvous_recv(header.id, receive_status(peer, r.offered, r.capacity), length);
  } else {
    r.request = request;
  }
  return UCS_OK;  // UCX owns the data descriptor from ucp_am_recv_data_nbx on
}

void UcxChannel::on_send_withdrawn(int peer, uint32_t send_id) {
  bool found = false;
  matches_.for_each_unexpected(peer, [&](uint64_t, Arrival& a) {
    if (a.type == UcxHeader::Type::request && a.send_id == send_id) {
      a.withdrawn = true;
      found = true;
    }
  });
  if (found) return;
  for (auto& [id, r] : rendezvous_) {
    if (r.peer == peer && r.send_id == send_id && !r.request) {
      end_rendezvous_recv(id, withdrawn(peer, "sender"), 0);
      return;
    }
  }
}

void UcxChannel::on_receive_withdrawn(int peer, uint32_t send_id) {
  auto it = sends_.find(send_id);
  if (it == sends_.end() || it->second.peer != peer) return;
  it->second.answered = false;  // its data must not go
  end_send(send_id, withdrawn(it->second.peer, "receiver"));
}

}  // namespace ibcoll::transport::ucx
