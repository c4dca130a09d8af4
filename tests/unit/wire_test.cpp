// Wire headers: well-formed messages parse; anything truncated, foreign or of a newer version
// is rejected rather than trusted.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "transport/wire.h"

namespace ibcoll::transport::wire {
namespace {

std::vector<std::byte> encode(const MessageHeader& h, size_t body) {
  std::vector<std::byte> bytes(sizeof(h) + body);
  std::memcpy(bytes.data(), &h, sizeof(h));
  return bytes;
}

TEST(Wire, EagerMessageRoundTrips) {
  MessageHeader h;
  h.type = Type::eager;
  h.source = 5;
  h.tag = 0x1122334455667788ull;
  h.length = 10;
  h.credits = 3;
  auto bytes = encode(h, 10);
  auto parsed = parse_message(bytes.data(), bytes.size());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->source, 5u);
  EXPECT_EQ(parsed->tag, h.tag);
  EXPECT_EQ(parsed->length, 10u);
  EXPECT_EQ(parsed->credits, 3u);
  EXPECT_EQ(body_size(*parsed), 10u);
}

// A message in parts: each part's length is what follows it, `more` what is still to come.
TEST(Wire, EagerPartsCarryTheirOwnLength) {
  MessageHeader h;
  h.type = Type::eager_more;
  h.length = 8;
  h.more = 1000;
  auto bytes = encode(h, 8);
  auto parsed = parse_message(bytes.data(), bytes.size());
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->more, 1000u);
  EXPECT_EQ(body_size(*parsed), 8u);
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size() - 1));
  h.more = kMaxEagerBytes;  // more than any eager message may hold
  bytes = encode(h, 8);
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size()));
}

TEST(Wire, RejectsTruncatedPayload) {
  MessageHeader h;
  h.length = 100;
  auto bytes = encode(h, 99);
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size()));
  EXPECT_FALSE(parse_message(bytes.data(), sizeof(h) - 1));
}

TEST(Wire, RejectsForeignMagicVersionAndType) {
  MessageHeader h;
  h.magic = 0xdead;
  auto bytes = encode(h, 0);
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size()));
  h = {};
  h.version = kVersion + 1;
  bytes = encode(h, 0);
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size()));
  h = {};
  h.type = Type::handshake_request;  // never valid on a connection
  bytes = encode(h, 0);
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size()));
}

TEST(Wire, RendezvousBodiesAreRequired) {
  MessageHeader h;
  h.type = Type::rts;
  h.length = 1 << 30;  // the total, not what follows
  auto bytes = encode(h, sizeof(RendezvousRequest));
  ASSERT_TRUE(parse_message(bytes.data(), bytes.size()));
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size() - 1));
  h.type = Type::cts;
  bytes = encode(h, sizeof(ReadyToReceive) - 1);
  EXPECT_FALSE(parse_message(bytes.data(), bytes.size()));
}

TEST(Wire, HandshakeParsesOnlyHandshakeTypes) {
  HandshakeMessage m;
  m.type = Type::handshake_reply;
  m.qp_num = 77;
  m.srq_num = 0x1234;
  m.target_qp_num = 0xabcdef;
  m.incarnation = 9;
  std::byte bytes[sizeof(m)];
  std::memcpy(bytes, &m, sizeof(m));
  auto parsed = parse_handshake(bytes, sizeof(bytes));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->qp_num, 77u);
  EXPECT_EQ(parsed->srq_num, 0x1234u);          // XRC: the SRQ the peer's sends name
  EXPECT_EQ(parsed->target_qp_num, 0xabcdefu);  // XRC: the TGT made or joined
  EXPECT_FALSE(parse_handshake(bytes, sizeof(bytes) - 1));
  m.type = Type::eager;
  std::memcpy(bytes, &m, sizeof(m));
  EXPECT_FALSE(parse_handshake(bytes, sizeof(bytes)));
}

}  // namespace
}  // namespace ibcoll::transport::wire
