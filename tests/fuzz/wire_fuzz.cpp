// libFuzzer target: the verbs wire's parsers (a message header and its body, a handshake
// datagram, rdma_cm's private data) on bytes a peer or a stranger sent. A header that parses
// must describe a body that fits what arrived and an eager part within the cap.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "transport/wire.h"

using namespace ibcoll::transport::wire;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (const auto header = parse_message(data, size)) {
    if (sizeof(MessageHeader) + body_size(*header) > size) std::abort();
    const bool eager = header->type == Type::eager || header->type == Type::eager_more;
    if (eager && header->length + header->more > kMaxEagerBytes) std::abort();
  }
  if (const auto handshake = parse_handshake(data, size)) {
    if (handshake->type != Type::handshake_request && handshake->type != Type::handshake_reply) {
      std::abort();
    }
  }
  if (const auto connect = parse_connect_data(data, size)) {
    if (connect->magic != kMagic || size < sizeof(ConnectData)) std::abort();
  }
  return 0;
}
