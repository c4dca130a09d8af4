// The TCP store's wire: what a client and the server say to each other, and the parsers of the
// bytes each takes from the other (a stranger's too, before it has shown the job's secret). Kept
// apart from the sockets so that libFuzzer feeds them (tests/fuzz/store_frame_fuzz.cpp).
//
// Frames: u32 length of what follows, then a one-byte op and its body. After the hello, a rank
// says which it is (kIdentify, u32 rank; answered kAccepted, or kComeBack where that rank has
// been served already: it opens the job's next store, and this one is on its way out) and,
// leaving in order, says goodbye (kBye); a rank whose connection ends without one is lost, and a
// get that can no longer be answered then gets kLost (why) instead of a value. kSet is a named
// body (u32 key length, key, value). kAskGone (u32 rank) gets a value: why that rank is lost, or
// empty. kGather (a named body: the allgather's name, this rank's part) is an allgather the
// server completes: once every rank's part is in, each gets one kValue of every part in rank
// order (each a u32 length and the part), so an allgather is P requests and P replies, not P
// gets per rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ibcoll::runtime::store_frames {

constexpr char kHello = 'H', kAccepted = 'A', kRejected = 'R', kSet = 'S', kGet = 'G', kValue = 'V',
               kIdentify = 'I', kBye = 'B', kLost = 'L', kAskGone = 'Q', kGather = 'C',
               kComeBack = 'K';
constexpr uint32_t kMaxFrame = 64u << 20;
// The only frame a client may send before it has presented the secret (a hello, whose secret is
// short): a stranger can make the server hold little memory.
constexpr uint32_t kMaxHelloFrame = 1024;

std::string frame(char op, std::string_view body);

enum class Taken { none, frame, malformed };
// Takes one whole frame (of at most `max` bytes) off the front of `buffer`: none while it is
// incomplete; malformed for a length of 0 or past `max` (the buffer is left as it was).
Taken take_frame(std::string& buffer, char& op, std::string& body, uint32_t max);

// A body of u32 length, name, rest (kSet, kGather).
std::string named(std::string_view name, std::string_view rest);
struct Named {
  std::string name, rest;
};
// nullopt where the length runs past the body's end.
std::optional<Named> split_named(std::string_view body);

// A body of exactly one u32 (kIdentify, kAskGone).
std::string rank_body(uint32_t rank);
std::optional<uint32_t> rank_of(std::string_view body);

// An allgather's reply: each part as a u32 length and its bytes; nullopt where a length runs
// past the end.
std::string joined_parts(const std::vector<std::string_view>& parts);
std::optional<std::vector<std::string>> split_parts(std::string_view whole);

}  // namespace ibcoll::runtime::store_frames
