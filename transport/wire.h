// Headers on the wire. Every message starts with a MessageHeader; handshake datagrams (UD) are
// a HandshakeMessage. Fields are little-endian (the only byte order ibcoll runs on); parse_*
// checks magic, version, type and length so a stray or truncated packet is rejected, not
// trusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

namespace ibcoll::transport::wire {

constexpr uint16_t kMagic = 0x1BC0;
constexpr uint8_t kVersion = 3;  // 3: keepalives are RDMA writes, no message
// The longest eager message (IBCOLL_EAGER_LIMIT's cap): a part announcing more is malformed, so
// a stray header cannot make a receiver set aside gigabytes for it.
constexpr uint64_t kMaxEagerBytes = uint64_t{1} << 20;

enum class Type : uint8_t {
  eager = 1,          // payload follows the header (its first part, if `more` is not 0)
  rts,                // rendezvous request: length = total bytes; RendezvousRequest follows
  cts,                // rendezvous reply: ReadyToReceive follows; the data comes by RDMA write
  credit,             // returns receive credits only
  ready,              // first message on a new connection: the sender is ready to receive
  handshake_request,  // over UD: please connect to my endpoint
  handshake_reply,    // over UD: connected to yours
  eager_more,         // the next part of the eager message this sender started last
  send_withdrawn,     // the sender gave message `tag` up: its rendezvous (length = its send
                      // id), or, with send id 0, the eager message it was sending in parts
  receive_withdrawn,  // the receiver gave up the receive it answered rendezvous `length` with
  notice,             // a Notice: `tag` its subject, `length` its kind and detail (packed)
  credit_recall,      // the receiver asks `length` of its credits back, if unused
  credit_given_back,  // `length` unused credits, given back answering a recall
};

struct MessageHeader {
  uint16_t magic = kMagic;
  uint8_t version = kVersion;
  Type type = Type::eager;
  uint32_t source = 0;  // sender's rank
  uint64_t tag = 0;
  uint64_t length = 0;   // eager, eager_more: payload bytes; rts: total bytes of the message;
                         // send_withdrawn, receive_withdrawn: the rendezvous's send id
  uint32_t credits = 0;  // receive credits returned to the destination
  uint32_t more = 0;     // eager, eager_more: bytes of the message still to come after these
};
static_assert(sizeof(MessageHeader) == 32);

struct RendezvousRequest {
  uint32_t send_id = 0;  // sender's handle for this transfer, echoed in the reply
  uint32_t reserved = 0;
};

// Why a receiver refuses a rendezvous (ReadyToReceive with recv_id 0).
enum class Refusal : uint32_t {
  unregistrable = 0,  // it could not register its buffer
  withdrawn = 1,      // its receive was given up before it answered
};

struct ReadyToReceive {
  uint32_t send_id = 0;  // from the RendezvousRequest
  uint32_t recv_id = 0;  // comes back as the immediate of the RDMA write; 0: refused
  uint64_t address = 0;  // receiver's buffer
  uint64_t length = 0;   // bytes the receiver accepts (≤ the request's length)
  uint32_t rkey = 0;
  Refusal refusal = Refusal::unregistrable;  // when refused
};

struct HandshakeMessage {
  uint16_t magic = kMagic;
  uint8_t version = kVersion;
  Type type = Type::handshake_request;
  uint32_t source = 0;       // sender's rank
  uint32_t destination = 0;  // intended receiver's rank: misrouted datagrams are dropped
  uint32_t qp_num = 0;       // sender's RC QP (XRC request: its INI QP for our node)
  uint32_t psn = 0;          // that QP's initial packet sequence number (XRC reply: the TGT's)
  uint32_t srq_num = 0;      // sender's SRQ number (XRC addressing); 0 without XRC
  uint32_t credits = 0;      // receive credits the sender grants the receiver
  // XRC: a request names the TGT QP its INI already uses on the receiver's node (0: make one);
  // a reply names the TGT the receiver made or joined, or 0 to refuse a TGT that no longer
  // exists (named then in qp_num): the asker makes a new INI. 0 for RC.
  uint32_t target_qp_num = 0;
  uint64_t incarnation = 0;  // sender's endpoint generation: a restarted peer is not confused
};
static_assert(sizeof(HandshakeMessage) == 40);

// Private data of an rdma_cm connect request and of its accept.
struct ConnectData {
  uint16_t magic = kMagic;
  uint8_t version = kVersion;
  uint8_t reserved = 0;
  uint32_t source = 0;   // sender's rank
  uint32_t credits = 0;  // receive credits the sender grants
  uint32_t reserved2 = 0;
  uint64_t incarnation = 0;
};
static_assert(sizeof(ConnectData) == 24);  // rdma_cm carries at most 56 bytes on RC connect

// Returns the header if `bytes` holds a well-formed one whose payload fits in `size`.
std::optional<MessageHeader> parse_message(const void* bytes, size_t size);
std::optional<HandshakeMessage> parse_handshake(const void* bytes, size_t size);
std::optional<ConnectData> parse_connect_data(const void* bytes, size_t size);

// Bytes that follow the header for this type (eager: its payload; rts/cts: their bodies).
size_t body_size(const MessageHeader& header);

}  // namespace ibcoll::transport::wire
