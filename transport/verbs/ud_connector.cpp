#include "transport/verbs/ud_connector.h"

#include "transport/verbs/work_id.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "base/log.h"

namespace ibcoll::transport::verbs {
namespace {
constexpr uint32_t kDatagramDepth = 64;
}  // namespace

UdConnector::UdConnector(const ConnectionSetup& setup, uint32_t qkey, Listener& listener)
    : ConnectionManager(setup, listener),
      ud_(setup.pd, setup.cq, setup.device, qkey, kDatagramDepth, sizeof(wire::HandshakeMessage)) {}

EndpointAddress UdConnector::local_address() const {
  EndpointAddress address;
  address.port = setup_.device.address();
  address.ud_qp_num = ud_.qp_num();
  address.srq_num = setup_.srq_num;
  address.xrc = xrc() ? 1 : 0;
  address.incarnation = setup_.incarnation;
  return address;
}

void UdConnector::create_queue_pair(int peer) {
  Link& l = link(peer);
  l.qp = std::make_unique<RcQueuePair>(setup_.pd, setup_.cq, setup_.srq, setup_.send_depth,
                                       setup_.device);
  peer_by_qp_[l.qp->qp_num()] = peer;
  ++stats_.connections;
  l.started = Clock::now();
}

void UdConnector::connect(int peer) {
  Link& l = link(peer);
  if (l.state != State::idle) return;
  if (!have_addresses()) {
    throw Error(Code::internal, "connect before the peer addresses were exchanged");
  }
  // The link is `requested` only once its QP exists: a QP that cannot be made leaves it idle.
  if (xrc()) {
    const bool ask_now = join_initiator(peer, l);
    l.state = State::requested;
    l.started = Clock::now();
    if (ask_now) send_handshake(peer, wire::Type::handshake_request);
    return;
  }
  create_queue_pair(peer);
  l.state = State::requested;
  IBCOLL_LOG(debug, "connecting to peer " << peer << " (QP " << l.qp->qp_num() << ")");
  send_handshake(peer, wire::Type::handshake_request);
}

bool UdConnector::join_initiator(int peer, Link& l) {
  const XrcInitiators::Joined joined = initiators_.join(peer, address_of(peer).port);
  if (joined.created) {
    try {
      joined.initiator->qp =
          std::make_unique<XrcInitiator>(setup_.pd, setup_.cq, setup_.send_depth, setup_.device);
    } catch (...) {
      initiators_.leave(peer, *joined.initiator);  // the port stays free for the next try
      throw;
    }
    ++stats_.connections;
    IBCOLL_LOG(debug, "XRC INI QP " << joined.initiator->qp->qp_num() << " for peer " << peer
                                    << "'s node; peer " << peer << " makes its TGT");
  }
  l.initiator = joined.initiator;
  return joined.ask_now;
}

bool UdConnector::waits_for_initiator(int peer, const Link& l) {
  return l.initiator && !l.initiator->connected && l.initiator->creator != peer;
}

SendPath UdConnector::send_path(int peer) const {
  const Link* l = links_.find(peer);
  if (!l) return {};
  if (l->qp) return {l->qp->get(), l->qp->caps(), 0};
  if (l->initiator && l->initiator->connected) {
    return {l->initiator->qp->get(), l->initiator->qp->caps(), l->remote_srq_num};
  }
  return {};
}

uint32_t UdConnector::granted_credits(int peer) const {
  const Link* l = links_.find(peer);
  return l ? l->granted_credits : 0;
}

bool UdConnector::on_completion(const ibv_wc& wc) {
  switch (work_kind(wc.wr_id)) {
    case WorkKind::ud_receive:
      on_datagram(static_cast<uint32_t>(work_index(wc.wr_id)),
                  wc.status == IBV_WC_SUCCESS ? wc.byte_len : 0);
      return true;
    case WorkKind::ud_send:
      ud_.send_completed();
      return true;
    default:
      return false;
  }
}

void UdConnector::send_handshake(int peer, wire::Type type) {
  Link& l = link(peer);
  wire::HandshakeMessage m;
  m.type = type;
  if (!xrc()) {
    m.qp_num = l.qp->qp_num();
    m.psn = l.qp->psn();
  } else if (type == wire::Type::handshake_request) {
    m.qp_num = l.initiator->qp->qp_num();
    m.psn = l.initiator->qp->psn();
    m.target_qp_num = l.initiator->target_qp_num;  // 0 asks the peer to make the TGT
  } else {
    m.target_qp_num = l.target->qp_num();
    m.psn = l.target->psn();
  }
  m.srq_num = setup_.srq_num;
  m.credits = listener_.credits_for(peer);
  post_handshake(peer, m);
  if (type == wire::Type::handshake_request) l.last_request = Clock::now();
}

// A reply naming no TGT, and in qp_num the one the request named, which cannot be opened.
void UdConnector::send_refusal(int peer, uint32_t target_qp_num) {
  wire::HandshakeMessage m;
  m.type = wire::Type::handshake_reply;
  m.qp_num = target_qp_num;
  post_handshake(peer, m);
}

void UdConnector::post_handshake(int peer, wire::HandshakeMessage& m) {
  Link& l = link(peer);
  const EndpointAddress& remote = address_of(peer);
  if (!l.ah) l.ah = ud_.make_address_handle(remote.port);
  m.source = static_cast<uint32_t>(setup_.rank);
  m.destination = static_cast<uint32_t>(peer);
  m.incarnation = setup_.incarnation;
  ud_.send(l.ah.get(), remote.ud_qp_num, &m, sizeof(m));
  ++stats_.handshakes_sent;
}

void UdConnector::accept_remote(int peer, const wire::HandshakeMessage& m) {
  Link& l = link(peer);
  l.qp->connect(address_of(peer).port, m.qp_num, m.psn);
  l.remote_qp_num = m.qp_num;
  l.remote_incarnation = m.incarnation;
  l.granted_credits = m.credits;
  l.state = State::connected;
}

void UdConnector::on_datagram(uint32_t slot, uint32_t byte_len) {
  auto message = wire::parse_handshake(
      ud_.payload(slot), byte_len > UdQueuePair::kGrhBytes ? byte_len - UdQueuePair::kGrhBytes : 0);
  ud_.repost(slot);
  const int peer = message ? static_cast<int>(message->source) : -1;
  if (!message || message->destination != static_cast<uint32_t>(setup_.rank) || peer < 0 ||
      peer >= setup_.size || peer == setup_.rank || !have_addresses() ||
      message->incarnation != address_of(peer).incarnation) {
    ++stats_.handshakes_dropped;  // malformed, misrouted, or from an endpoint we do not know
    return;
  }
  Link& l = link(peer);
  if (l.state == State::failed) return;
  if (!xrc()) return on_rc_handshake(peer, l, *message);
  if (message->type == wire::Type::handshake_request) return on_xrc_request(peer, l, *message);
  on_xrc_reply(peer, l, *message);
}

void UdConnector::on_rc_handshake(int peer, Link& l, const wire::HandshakeMessage& message) {
  if (l.remote_qp_num != 0 && l.remote_qp_num != message.qp_num) {
    ++stats_.handshakes_dropped;
    return;
  }
  if (message.type == wire::Type::handshake_request) {
    if (l.state == State::idle) create_queue_pair(peer);
    if (l.state == State::idle || l.state == State::requested) accept_remote(peer, message);
    send_handshake(peer, wire::Type::handshake_reply);  // also answers a resent request
    return;
  }
  // A reply: the peer's QP is connected to ours and can receive.
  if (l.state == State::requested) accept_remote(peer, message);
  if (l.state == State::connected) {
    l.state = State::ready;
    IBCOLL_LOG(debug, "connected to peer " << peer);
    listener_.on_connected(peer, true);
  }
}

// The peer asks to send to us through its INI: through a TGT we make (it names none) or the one
// another process of this node made for that INI. A resent request finds the TGT in place.
void UdConnector::on_xrc_request(int peer, Link& l, const wire::HandshakeMessage& m) {
  if (!l.target || l.remote_initiator != m.qp_num) {
    std::optional<XrcTarget> target;
    try {
      target = m.target_qp_num == 0 ? XrcTarget::create(setup_.device, setup_.xrcd,
                                                        address_of(peer).port, m.qp_num, m.psn)
                                    : XrcTarget::open(setup_.device, setup_.xrcd, m.target_qp_num);
    } catch (const Error& e) {
      // The device refused: the peer asks again.
      IBCOLL_LOG(warn, "XRC request of peer " << peer << ": " << e.status().message());
      ++stats_.handshakes_dropped;
      return;
    }
    if (!target) {
      // Every process of this node that held the TGT has exited, and the kernel destroyed it
      // with the last: the peer needs a new INI, whose TGT we make.
      IBCOLL_LOG(info, "XRC request of peer " << peer << " names TGT " << m.target_qp_num
                                              << ", which no process here holds any more: "
                                                 "refused, so that it makes a new INI");
      return send_refusal(peer, m.target_qp_num);
    }
    if (l.target) peer_by_qp_.erase(l.target->qp_num());  // the peer's INI before this one
    l.target = std::move(target);
    l.remote_initiator = m.qp_num;
    peer_by_qp_[l.target->qp_num()] = peer;
  }
  send_handshake(peer, wire::Type::handshake_reply);
  connect(peer);  // our direction, for credit returns and whatever we send it
}

// The peer can receive through our INI: connect the INI if the peer made its TGT, then ask the
// port's other peers, naming it.
void UdConnector::on_xrc_reply(int peer, Link& l, const wire::HandshakeMessage& m) {
  if (l.state != State::requested || !l.initiator) return;  // answered already
  XrcInitiators::Initiator& ini = *l.initiator;
  if (m.target_qp_num == 0) return on_xrc_refusal(peer, l, m.qp_num);
  if (!ini.connected && ini.creator == peer) {
    ini.qp->connect(address_of(peer).port, m.target_qp_num, m.psn);  // first: it may throw
    std::vector<int> ask;
    initiators_.connect(ini, peer, m.target_qp_num, ask);
    for (int waiting : ask)
      send_handshake(waiting, wire::Type::handshake_request);
  } else if (!ini.connected || m.target_qp_num != ini.target_qp_num) {
    ++stats_.handshakes_dropped;  // from a creator that failed meanwhile, or for an INI gone
    return;
  }
  l.granted_credits = m.credits;
  l.remote_srq_num = m.srq_num;
  l.state = State::ready;
  IBCOLL_LOG(debug, "connected to peer " << peer << " (XRC)");
  listener_.on_connected(peer, false);
}

// The peer's node no longer has the TGT that our INI to its port is connected to: the INI
// leaves the port (its other peers, whose processes held that TGT and so have exited, keep it
// until they fail), and the peer is connected anew, through the port's next INI.
void UdConnector::on_xrc_refusal(int peer, Link& l, uint32_t refused_target) {
  XrcInitiators::Initiator& ini = *l.initiator;
  if (!ini.connected || ini.target_qp_num != refused_target) {
    ++stats_.handshakes_dropped;  // for an INI this link no longer asks through
    return;
  }
  const XrcInitiators::Left left = initiators_.abandon(peer, ini);
  if (left.retired) move_to_error(left.retired->get());
  l.initiator = nullptr;
  l.state = State::idle;
  IBCOLL_LOG(info, "peer " << peer << "'s node no longer has TGT " << refused_target
                           << ": connecting through a new INI");
  try {
    connect(peer);
  } catch (const Error& e) {
    listener_.on_connect_failed(peer, e.status());  // its operations fail, rather than wait
  }
}

void UdConnector::on_rc_message(int peer) {
  Link* found = links_.find(peer);
  if (!found || found->state != State::connected) return;
  Link& l = *found;
  l.state = State::ready;
  IBCOLL_LOG(debug, "connected to peer " << peer << " (passive)");
  listener_.on_connected(peer, false);
}

void UdConnector::tick(Clock::time_point now) {
  handshaking_.clear();
  links_.for_each([&](int peer, const Link& l) {
    if (l.state == State::requested || l.state == State::connected) handshaking_.push_back(peer);
  });
  for (int peer : handshaking_) {
    Link& l = link(peer);
    if (l.state != State::requested && l.state != State::connected) continue;
    // A peer that does not answer may be busy elsewhere (computing, not polling) rather than
    // gone: it is never failed for that. Calls waiting on it end by their own deadline, and a
    // dead one is known from the ranks that saw it die (RoutedChannel); the handshake goes on,
    // less often once past the deadline (every 10 s at most), in case it answers after all.
    const auto waited = now - l.started;
    const bool late = waited >= setup_.options.timeout;
    if (late && !std::exchange(l.said_slow, true)) {
      IBCOLL_LOG(warn, "peer " << peer << " has not completed the connection handshake within "
                               << setup_.options.timeout.count()
                               << " ms (IBCOLL_TIMEOUT); still trying");
    }
    const auto retry =
        late ? std::max<Clock::duration>(setup_.options.handshake_retry, std::chrono::seconds(10))
             : Clock::duration(setup_.options.handshake_retry);
    if (l.state == State::requested && !waits_for_initiator(peer, l) &&
        now - l.last_request >= retry) {
      ++stats_.handshake_retries;
      send_handshake(peer, wire::Type::handshake_request);
    }
    // Silent as long as a keepalive would fail a connected peer: is it known gone?
    const auto silence = kUnansweredProbes * setup_.options.keepalive;
    if (setup_.options.why_gone && waited >= silence && now - l.last_asked >= silence) {
      l.last_asked = now;
      if (const std::string why = setup_.options.why_gone(peer); !why.empty()) {
        listener_.on_peer_gone(
            peer,
            Status(Code::peer_failed, "peer " + std::to_string(peer) +
                                          " never answered the connection handshake: " + why));
      }
    }
  }
}

void UdConnector::release(int peer) {
  Link& l = link(peer);
  if (l.state != State::failed || !l.qp) return;
  peer_by_qp_.erase(l.qp->qp_num());
  l.qp.reset();
}

void UdConnector::forget(int peer) {
  Link& l = link(peer);
  l.state = State::failed;
  if (XrcInitiators::Initiator* ini = std::exchange(l.initiator, nullptr)) {
    const XrcInitiators::Left left = initiators_.leave(peer, *ini);
    // What unsignaled sends still hold on it flushes back to the channel.
    if (left.retired) move_to_error(left.retired->get());
    if (left.next_creator >= 0) {
      // Inside the channel's failing of `peer`: a datagram that cannot go now is resent by tick.
      try {
        send_handshake(left.next_creator, wire::Type::handshake_request);
      } catch (const Error& e) {
        IBCOLL_LOG(warn, "XRC request to peer " << left.next_creator << ": " << e.what());
      }
    }
  }
}

}  // namespace ibcoll::transport::verbs
