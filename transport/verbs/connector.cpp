#include "transport/verbs/connector.h"

#include <cstring>
#include <random>

#include "base/log.h"

namespace ibcoll::transport::verbs {
namespace {
constexpr uint32_t kDatagramDepth = 64;
}

Connector::Connector(const Device& device, ibv_pd* pd, ibv_cq* cq, ibv_srq* srq,
                     const Options& options, int rank, int size, uint32_t qkey, uint32_t send_depth,
                     uint32_t credits, Listener& listener)
    : device_(device),
      pd_(pd),
      cq_(cq),
      srq_(srq),
      options_(options),
      rank_(rank),
      size_(size),
      send_depth_(send_depth),
      credits_(credits),
      incarnation_(std::random_device{}() | (uint64_t{std::random_device{}()} << 32)),
      listener_(listener),
      ud_(pd, cq, device, qkey, kDatagramDepth, sizeof(wire::HandshakeMessage)),
      links_(static_cast<size_t>(size)) {}

EndpointAddress Connector::local_address(uint32_t srq_num) const {
  return {device_.address(), ud_.qp_num(), srq_num, incarnation_};
}

void Connector::set_peer_addresses(std::vector<EndpointAddress> addresses) {
  if (addresses.size() != static_cast<size_t>(size_)) {
    throw Error(Code::invalid_argument, "peer addresses: expected " + std::to_string(size_) +
                                            ", got " + std::to_string(addresses.size()));
  }
  addresses_ = std::move(addresses);
}

RcQueuePair& Connector::connect(int peer) {
  Link& l = link(peer);
  if (l.state == State::idle) {
    if (addresses_.empty()) {
      throw Error(Code::internal, "connect before the peer addresses were exchanged");
    }
    l.qp = std::make_unique<RcQueuePair>(pd_, cq_, srq_, send_depth_, device_);
    peer_by_qp_[l.qp->qp_num()] = peer;
    ++stats_.connections;
    l.state = State::requested;
    l.started = Clock::now();
    IBCOLL_LOG(debug, "connecting to peer " << peer << " (QP " << l.qp->qp_num() << ")");
    send_handshake(peer, wire::Type::handshake_request);
  }
  return *l.qp;
}

RcQueuePair* Connector::queue_pair(int peer) const {
  return links_[static_cast<size_t>(peer)].qp.get();
}

bool Connector::can_send(int peer) const {
  return links_[static_cast<size_t>(peer)].state == State::ready;
}

uint32_t Connector::granted_credits(int peer) const {
  return links_[static_cast<size_t>(peer)].granted_credits;
}

int Connector::peer_of_qp(uint32_t qp_num) const {
  auto it = peer_by_qp_.find(qp_num);
  return it == peer_by_qp_.end() ? -1 : it->second;
}

void Connector::send_handshake(int peer, wire::Type type) {
  Link& l = link(peer);
  const EndpointAddress& remote = addresses_[static_cast<size_t>(peer)];
  if (!l.ah) l.ah = ud_.make_address_handle(remote.port);
  wire::HandshakeMessage m;
  m.type = type;
  m.source = static_cast<uint32_t>(rank_);
  m.destination = static_cast<uint32_t>(peer);
  m.qp_num = l.qp->qp_num();
  m.psn = l.qp->psn();
  m.credits = credits_;
  m.incarnation = incarnation_;
  ud_.send(l.ah.get(), remote.ud_qp_num, &m, sizeof(m));
  ++stats_.handshakes_sent;
  if (type == wire::Type::handshake_request) l.last_request = Clock::now();
}

void Connector::accept_remote(int peer, const wire::HandshakeMessage& m) {
  Link& l = link(peer);
  l.qp->connect(addresses_[static_cast<size_t>(peer)].port, m.qp_num, m.psn);
  l.remote_qp_num = m.qp_num;
  l.remote_incarnation = m.incarnation;
  l.granted_credits = m.credits;
  l.state = State::connected;
}

void Connector::on_datagram(uint32_t slot, uint32_t byte_len) {
  auto message = wire::parse_handshake(
      ud_.payload(slot), byte_len > UdQueuePair::kGrhBytes ? byte_len - UdQueuePair::kGrhBytes : 0);
  ud_.repost(slot);
  const int peer = message ? static_cast<int>(message->source) : -1;
  if (!message || message->destination != static_cast<uint32_t>(rank_) || peer < 0 ||
      peer >= size_ || peer == rank_ || addresses_.empty() ||
      message->incarnation != addresses_[static_cast<size_t>(peer)].incarnation) {
    ++stats_.handshakes_dropped;  // malformed, misrouted, or from an endpoint we do not know
    return;
  }
  Link& l = link(peer);
  if (l.state == State::failed) return;
  if (l.remote_qp_num != 0 && l.remote_qp_num != message->qp_num) {
    ++stats_.handshakes_dropped;
    return;
  }

  if (message->type == wire::Type::handshake_request) {
    if (l.state == State::idle) {
      l.qp = std::make_unique<RcQueuePair>(pd_, cq_, srq_, send_depth_, device_);
      peer_by_qp_[l.qp->qp_num()] = peer;
      ++stats_.connections;
      l.started = Clock::now();
    }
    if (l.state == State::idle || l.state == State::requested) accept_remote(peer, *message);
    send_handshake(peer, wire::Type::handshake_reply);  // also answers a resent request
    return;
  }
  // A reply: the peer's QP is connected to ours and can receive.
  if (l.state == State::requested) accept_remote(peer, *message);
  if (l.state == State::connected) {
    l.state = State::ready;
    IBCOLL_LOG(debug, "connected to peer " << peer);
    listener_.on_connected(peer, true);
  }
}

void Connector::on_rc_message(int peer) {
  Link& l = link(peer);
  if (l.state != State::connected) return;
  l.state = State::ready;
  IBCOLL_LOG(debug, "connected to peer " << peer << " (passive)");
  listener_.on_connected(peer, false);
}

void Connector::tick(Clock::time_point now) {
  for (int peer = 0; peer < size_; ++peer) {
    Link& l = link(peer);
    if (l.state != State::requested && l.state != State::connected) continue;
    if (now - l.started >= options_.timeout) {
      l.state = State::failed;
      listener_.on_connect_failed(
          peer, Status(Code::peer_failed, "peer " + std::to_string(peer) +
                                              " did not complete the connection handshake within " +
                                              std::to_string(options_.timeout.count()) +
                                              " ms (IBCOLL_TIMEOUT)"));
      continue;
    }
    if (l.state == State::requested && now - l.last_request >= options_.handshake_retry) {
      ++stats_.handshake_retries;
      send_handshake(peer, wire::Type::handshake_request);
    }
  }
}

void Connector::forget(int peer) {
  link(peer).state = State::failed;
}

}  // namespace ibcoll::transport::verbs
