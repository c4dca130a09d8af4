#include "runtime/bootstrap/store_frames.h"

#include <cstring>

namespace ibcoll::runtime::store_frames {
namespace {

void append_u32(std::string& out, uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), 4);
}

uint32_t u32_at(std::string_view bytes, size_t at) {
  uint32_t value;
  std::memcpy(&value, bytes.data() + at, 4);
  return value;
}

}  // namespace

std::string frame(char op, std::string_view body) {
  std::string out;
  out.reserve(5 + body.size());
  append_u32(out, static_cast<uint32_t>(body.size() + 1));
  out += op;
  out += body;
  return out;
}

Taken take_frame(std::string& buffer, char& op, std::string& body, uint32_t max) {
  if (buffer.size() < 4) return Taken::none;
  const uint32_t length = u32_at(buffer, 0);
  if (length == 0 || length > max) return Taken::malformed;
  if (buffer.size() < 4 + size_t{length}) return Taken::none;
  op = buffer[4];
  body.assign(buffer, 5, length - 1);
  buffer.erase(0, 4 + size_t{length});
  return Taken::frame;
}

std::string named(std::string_view name, std::string_view rest) {
  std::string out;
  out.reserve(4 + name.size() + rest.size());
  append_u32(out, static_cast<uint32_t>(name.size()));
  out += name;
  out += rest;
  return out;
}

std::optional<Named> split_named(std::string_view body) {
  if (body.size() < 4) return std::nullopt;
  const uint32_t length = u32_at(body, 0);
  if (body.size() - 4 < length) return std::nullopt;
  return Named{std::string(body.substr(4, length)), std::string(body.substr(4 + length))};
}

std::string rank_body(uint32_t rank) {
  std::string out;
  append_u32(out, rank);
  return out;
}

std::optional<uint32_t> rank_of(std::string_view body) {
  if (body.size() != 4) return std::nullopt;
  return u32_at(body, 0);
}

std::string joined_parts(const std::vector<std::string_view>& parts) {
  size_t total = 0;
  for (std::string_view p : parts)
    total += 4 + p.size();
  std::string out;
  out.reserve(total);
  for (std::string_view p : parts) {
    append_u32(out, static_cast<uint32_t>(p.size()));
    out += p;
  }
  return out;
}

std::optional<std::vector<std::string>> split_parts(std::string_view whole) {
  std::vector<std::string> parts;
  for (size_t at = 0; at < whole.size();) {
    if (whole.size() - at < 4) return std::nullopt;
    const uint32_t length = u32_at(whole, at);
    if (whole.size() - at - 4 < length) return std::nullopt;
    parts.emplace_back(whole.substr(at + 4, length));
    at += 4 + size_t{length};
  }
  return parts;
}

}  // namespace ibcoll::runtime::store_frames
