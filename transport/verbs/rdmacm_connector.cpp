#include "transport/verbs/rdmacm_connector.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "base/log.h"
#include "transport/verbs/cm_id_peer.h"

namespace ibcoll::transport::verbs {
namespace {

constexpr int kResolveTimeoutMs = 2000;

// The IP address behind a RoCE GID: IPv4-mapped GIDs carry an IPv4 address, others are IPv6.
sockaddr_storage ip_of(const uint8_t (&ip)[16], uint16_t port) {
  sockaddr_storage storage{};
  static const uint8_t v4_prefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(ip, v4_prefix, sizeof(v4_prefix)) == 0) {
    auto* in = reinterpret_cast<sockaddr_in*>(&storage);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    std::memcpy(&in->sin_addr, ip + 12, 4);
  } else {
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&storage);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = htons(port);
    std::memcpy(&in6->sin6_addr, ip, 16);
  }
  return storage;
}

sockaddr* as_sockaddr(sockaddr_storage& s) {
  return reinterpret_cast<sockaddr*>(&s);
}

int peer_of(const rdma_cm_id* id) {
  return cm_peer_of(id->context);
}

}  // namespace

RdmaCmConnector::RdmaCmConnector(const ConnectionSetup& setup, Listener& listener)
    : ConnectionManager(setup, listener) {
  const PortAddress port = setup.device.address();
  if (!port.global) {
    throw Error(Code::not_supported, "IBCOLL_CM=rdmacm: " + setup.device.name() +
                                         " is InfiniBand; ibcoll's rdma_cm path needs a RoCE "
                                         "GID that carries the IP address");
  }
  hello_.source = static_cast<uint32_t>(setup.rank);
  hello_.incarnation = setup.incarnation;

  events_ = rdma_create_event_channel();
  if (!events_) throw_errno("rdma_create_event_channel", errno);
  try {
    fcntl(events_->fd, F_SETFL, fcntl(events_->fd, F_GETFL) | O_NONBLOCK);
    if (rdma_create_id(events_, &listen_id_, nullptr, RDMA_PS_TCP)) {
      throw_errno("rdma_create_id", errno);
    }
    uint8_t ip[16];
    std::memcpy(ip, port.gid, sizeof(ip));
    sockaddr_storage local = ip_of(ip, 0);
    if (rdma_bind_addr(listen_id_, as_sockaddr(local))) {
      throw_errno("rdma_bind_addr on the address of " + setup.device.name(), errno);
    }
    if (rdma_listen(listen_id_, 1024)) throw_errno("rdma_listen", errno);
    std::memcpy(address_.ip, ip, sizeof(ip));
    address_.cm_port = ntohs(rdma_get_src_port(listen_id_));
  } catch (...) {
    if (listen_id_) rdma_destroy_id(listen_id_);
    rdma_destroy_event_channel(events_);
    throw;
  }
  address_.port = port;
  address_.incarnation = setup.incarnation;
}

RdmaCmConnector::~RdmaCmConnector() {
  links_.for_each([this](int, Link& l) {
    if (l.attempt && l.attempt != l.id) destroy(l.attempt);
    if (l.id) destroy(l.id);
  });
  rdma_destroy_id(listen_id_);
  rdma_destroy_event_channel(events_);
}

void RdmaCmConnector::destroy(rdma_cm_id* id) {
  if (id->qp) {
    peer_by_qp_.erase(id->qp->qp_num);
    rdma_destroy_qp(id);
    --live_objects().qps;
  }
  rdma_destroy_id(id);
}

EndpointAddress RdmaCmConnector::local_address() const {
  return address_;
}

void RdmaCmConnector::connect(int peer) {
  Link& l = link(peer);
  if (l.state != State::idle) return;
  if (!have_addresses()) {
    throw Error(Code::internal, "connect before the peer addresses were exchanged");
  }
  rdma_cm_id* id = nullptr;
  if (rdma_create_id(events_, &id, cm_context_of(peer), RDMA_PS_TCP)) {
    throw_errno("rdma_create_id", errno);
  }
  const EndpointAddress& remote = address_of(peer);
  sockaddr_storage source = ip_of(address_.ip, 0);
  sockaddr_storage target = ip_of(remote.ip, remote.cm_port);
  if (rdma_resolve_addr(id, as_sockaddr(source), as_sockaddr(target), kResolveTimeoutMs)) {
    const int err = errno;
    rdma_destroy_id(id);
    throw_errno("rdma_resolve_addr to peer " + std::to_string(peer), err);
  }
  l.attempt = id;
  l.state = State::connecting;
  l.started = Clock::now();
  ++stats_.handshakes_sent;
  IBCOLL_LOG(debug, "rdma_cm: connecting to peer " << peer);
}

SendPath RdmaCmConnector::send_path(int peer) const {
  const Link* l = links_.find(peer);
  return l && l->id ? SendPath{l->id->qp, l->caps} : SendPath{};
}

uint32_t RdmaCmConnector::granted_credits(int peer) const {
  const Link* l = links_.find(peer);
  return l ? l->granted_credits : 0;
}

void RdmaCmConnector::create_queue_pair(rdma_cm_id* id, int peer, QueueCaps& caps) {
  ibv_qp_init_attr init = rc_init_attr(setup_.cq, setup_.srq, setup_.send_depth);
  if (rdma_create_qp(id, setup_.pd, &init)) throw_errno("rdma_create_qp", errno);
  ++live_objects().qps;
  caps = granted_caps(init);
  peer_by_qp_[id->qp->qp_num] = peer;
}

rdma_conn_param RdmaCmConnector::connect_param(int peer) {
  hello_.credits = listener_.credits_for(peer);
  rdma_conn_param param{};
  param.private_data = &hello_;
  param.private_data_len = sizeof(hello_);
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = kRetryCount;
  param.rnr_retry_count = kRnrRetryInfinite;
  return param;
}

void RdmaCmConnector::fail(int peer, const std::string& why) {
  Link& l = link(peer);
  if (l.state == State::failed) return;
  l.state = State::failed;
  listener_.on_connect_failed(
      peer, Status(Code::peer_failed, "peer " + std::to_string(peer) + ": " + why));
}

void RdmaCmConnector::forget(int peer) {
  link(peer).state = State::failed;
}

void RdmaCmConnector::tick(Clock::time_point now) {
  rdma_cm_event* event = nullptr;
  std::vector<rdma_cm_id*> retire;  // destroyed only after their event is acknowledged
  while (rdma_get_cm_event(events_, &event) == 0) {
    try {
      handle(*event, retire);
    } catch (const Error& e) {
      if (const int peer = peer_of(event->id); event->id != listen_id_ && peer >= 0) {
        fail(peer, e.what());
      }
    }
    rdma_ack_cm_event(event);
    for (rdma_cm_id* id : retire)
      destroy(id);
    retire.clear();
  }
  // A peer slow to accept may be busy elsewhere rather than gone: it is never failed for that
  // (calls waiting on it end by their own deadline); rdma_cm's own errors still fail it.
  links_.for_each([&](int peer, Link& l) {
    if (l.state == State::connecting && now - l.started >= setup_.options.timeout &&
        !std::exchange(l.said_slow, true)) {
      IBCOLL_LOG(warn, "rdma_cm connection to peer " << peer << " not established within "
                                                     << setup_.options.timeout.count()
                                                     << " ms (IBCOLL_TIMEOUT); still waiting");
    }
  });
}

void RdmaCmConnector::handle(rdma_cm_event& event, std::vector<rdma_cm_id*>& retire) {
  if (event.event == RDMA_CM_EVENT_CONNECT_REQUEST) return on_connect_request(event, retire);
  rdma_cm_id* id = event.id;
  const int peer = peer_of(id);
  if (peer < 0 || peer >= setup_.size) return;
  Link& l = link(peer);
  const bool dropped_attempt = id == l.attempt && l.id && l.id != id;
  if (dropped_attempt &&
      (event.event == RDMA_CM_EVENT_ADDR_RESOLVED || event.event == RDMA_CM_EVENT_ROUTE_RESOLVED)) {
    l.attempt = nullptr;  // the peer's connection to us was accepted meanwhile
    retire.push_back(id);
    return;
  }
  switch (event.event) {
    case RDMA_CM_EVENT_ADDR_RESOLVED:
      if (rdma_resolve_route(id, kResolveTimeoutMs)) throw_errno("rdma_resolve_route", errno);
      break;
    case RDMA_CM_EVENT_ROUTE_RESOLVED: {
      create_queue_pair(id, peer, l.caps);
      rdma_conn_param param = connect_param(peer);
      if (rdma_connect(id, &param)) throw_errno("rdma_connect", errno);
      break;
    }
    case RDMA_CM_EVENT_ESTABLISHED: {
      if (id == l.attempt) {
        auto data = wire::parse_connect_data(event.param.conn.private_data,
                                             event.param.conn.private_data_len);
        if (!data) throw Error(Code::peer_failed, "malformed rdma_cm accept data");
        l.granted_credits = data->credits;
        l.id = id;
        l.attempt = nullptr;
      }
      if (l.state != State::connecting || id != l.id) break;
      l.state = State::ready;
      ++stats_.connections;
      IBCOLL_LOG(debug, "rdma_cm: connected to peer " << peer);
      listener_.on_connected(peer, false);
      break;
    }
    case RDMA_CM_EVENT_REJECTED:
      // The peer's own connection to us wins (it has the lower rank): drop ours and wait.
      if (id == l.attempt) {
        l.attempt = nullptr;
        retire.push_back(id);
        ++stats_.handshakes_dropped;
      }
      break;
    case RDMA_CM_EVENT_ADDR_ERROR:
    case RDMA_CM_EVENT_ROUTE_ERROR:
    case RDMA_CM_EVENT_UNREACHABLE:
    case RDMA_CM_EVENT_CONNECT_ERROR:
      if (!dropped_attempt) {
        fail(peer, std::string("rdma_cm: ") + rdma_event_str(event.event) + " (status " +
                       std::to_string(event.status) + ")");
      }
      break;
    case RDMA_CM_EVENT_DISCONNECTED:
      if (id == l.id) fail(peer, "disconnected (rdma_cm)");
      break;
    default:
      IBCOLL_LOG(debug, "rdma_cm event " << rdma_event_str(event.event) << " for peer " << peer);
  }
}

void RdmaCmConnector::on_connect_request(rdma_cm_event& event, std::vector<rdma_cm_id*>& retire) {
  rdma_cm_id* id = event.id;
  auto data =
      wire::parse_connect_data(event.param.conn.private_data, event.param.conn.private_data_len);
  const int peer = data ? static_cast<int>(data->source) : -1;
  const bool known = data && peer >= 0 && peer < setup_.size && peer != setup_.rank &&
                     !!have_addresses() && address_of(peer).incarnation == data->incarnation;
  Link* l = known ? &link(peer) : nullptr;
  // Refuse strangers, duplicates, and the higher rank's request while our own is under way.
  if (!l || l->id || l->state == State::failed || (l->attempt && setup_.rank < peer)) {
    rdma_reject(id, nullptr, 0);
    retire.push_back(id);
    ++stats_.handshakes_dropped;
    return;
  }
  id->context = cm_context_of(peer);
  create_queue_pair(id, peer, l->caps);
  rdma_conn_param param = connect_param(peer);
  if (rdma_accept(id, &param)) {
    const int err = errno;
    retire.push_back(id);
    throw_errno("rdma_accept from peer " + std::to_string(peer), err);
  }
  l->id = id;
  l->granted_credits = data->credits;
  if (l->state == State::idle) {
    l->state = State::connecting;
    l->started = Clock::now();
  }
}

}  // namespace ibcoll::transport::verbs
