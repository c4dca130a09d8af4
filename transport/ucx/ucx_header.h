// The header of every active message the UCX channel sends (UCX carries it beside the payload).
// Little-endian, like the verbs wire; parse() checks magic, version and type so a stray message
// is rejected, not trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace ibcoll::transport::ucx {

struct UcxHeader {
  static constexpr uint16_t kMagic = 0x1BC5;
  static constexpr uint8_t kVersion = 1;
  static constexpr unsigned kActiveMessageId = 0x1B;  // the one UCP active-message id ibcoll uses

  enum class Type : uint8_t {
    eager = 1,          // the payload follows
    request,            // a large message: `length` bytes, `id` the sender's; please answer
    answer,             // to request `id`: send to my receive `reply_id` (0: refused)
    data,               // the data of the request the receive `id` answered
    send_withdrawn,     // the sender gave up its request `id` (tag `tag`)
    receive_withdrawn,  // the receiver gave up the receive that answered request `id`
    notice,             // a Notice: `tag` its subject, `length` its kind and detail (packed)
    probe,              // nothing: sent to a silent peer waited on, whose death the send reveals
  };

  uint16_t magic = kMagic;
  uint8_t version = kVersion;
  Type type = Type::eager;
  uint32_t source = 0;  // sender's rank
  uint64_t tag = 0;
  uint64_t length = 0;
  uint32_t id = 0;
  uint32_t reply_id = 0;  // answer: the receive's id; eager, request: the per-pair sequence
};
static_assert(sizeof(UcxHeader) == 32);

// The header in `bytes`, if it is one ibcoll's UCX channel of this version sent.
std::optional<UcxHeader> parse_header(const void* bytes, size_t size);

}  // namespace ibcoll::transport::ucx
