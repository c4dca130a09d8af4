#include "transport/wire.h"

#include <cstring>

namespace ibcoll::transport::wire {

size_t body_size(const MessageHeader& header) {
  switch (header.type) {
    case Type::eager:
    case Type::eager_more:
      return header.length;
    case Type::rts:
      return sizeof(RendezvousRequest);
    case Type::cts:
      return sizeof(ReadyToReceive);
    default:
      return 0;
  }
}

std::optional<MessageHeader> parse_message(const void* bytes, size_t size) {
  MessageHeader h;
  if (size < sizeof(h)) return std::nullopt;
  std::memcpy(&h, bytes, sizeof(h));
  if (h.magic != kMagic || h.version != kVersion) return std::nullopt;
  switch (h.type) {
    case Type::eager:
    case Type::eager_more:
    case Type::rts:
    case Type::cts:
    case Type::credit:
    case Type::ready:
    case Type::send_withdrawn:
    case Type::receive_withdrawn:
    case Type::notice:
    case Type::credit_recall:
    case Type::credit_given_back:
      break;
    default:
      return std::nullopt;
  }
  if (body_size(h) > size - sizeof(h)) return std::nullopt;
  if ((h.type == Type::eager || h.type == Type::eager_more) && h.length + h.more > kMaxEagerBytes) {
    return std::nullopt;
  }
  return h;
}

std::optional<HandshakeMessage> parse_handshake(const void* bytes, size_t size) {
  HandshakeMessage m;
  if (size < sizeof(m)) return std::nullopt;
  std::memcpy(&m, bytes, sizeof(m));
  if (m.magic != kMagic || m.version != kVersion) return std::nullopt;
  if (m.type != Type::handshake_request && m.type != Type::handshake_reply) return std::nullopt;
  return m;
}

}  // namespace ibcoll::transport::wire

namespace ibcoll::transport::wire {

std::optional<ConnectData> parse_connect_data(const void* bytes, size_t size) {
  ConnectData d;
  if (!bytes || size < sizeof(d)) return std::nullopt;
  std::memcpy(&d, bytes, sizeof(d));
  if (d.magic != kMagic || d.version != kVersion) return std::nullopt;
  return d;
}

}  // namespace ibcoll::transport::wire
