// libFuzzer target: the TCP store's frames and bodies (runtime/bootstrap/store_frames.h) on
// bytes a client (a stranger too, before its secret) or the server sent. Frames are taken off
// the input as a connection's buffer would hold it; each frame, and each body, must decode to
// what re-encodes to the very bytes consumed, and nothing may be taken past the caps.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/bootstrap/store_frames.h"

using namespace ibcoll::runtime::store_frames;

namespace {

void check(bool holds) {
  if (!holds) std::abort();
}

void bodies(const std::string& body) {
  if (const auto n = split_named(body)) check(named(n->name, n->rest) == body);
  if (const auto rank = rank_of(body)) check(rank_body(*rank) == body);
  if (const auto parts = split_parts(body)) {
    std::vector<std::string_view> views(parts->begin(), parts->end());
    check(joined_parts(views) == body);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the cap (a stranger's hello, or an authenticated client's frame); the
  // rest is what arrived.
  const uint32_t max = data[0] & 1 ? kMaxHelloFrame : kMaxFrame;
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::string buffer = input;
  char op;
  std::string body;
  size_t consumed = 0;
  while (true) {
    const size_t before = buffer.size();
    const Taken taken = take_frame(buffer, op, body, max);
    if (taken != Taken::frame) {
      check(buffer.size() == before);  // an incomplete or malformed frame takes nothing
      break;
    }
    check(body.size() + 1 <= max);
    const std::string again = frame(op, body);
    check(input.compare(consumed, again.size(), again) == 0);
    consumed += again.size();
    check(consumed + buffer.size() == input.size());
    bodies(body);
  }
  return 0;
}
