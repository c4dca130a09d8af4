// libFuzzer target: a stream of shared-memory fragment headers from a peer's ring, read as the
// receiver reads them (fragment_error before any field is trusted, a message under way or
// not). Whatever the peer wrote, an accepted fragment never carries more than a slot's payload
// nor takes a message past its announced total, and a total is never past the largest message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "transport/shm/fragment.h"

using namespace ibcoll::transport::shm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr uint64_t kMaxTotal = uint64_t{1} << 32;
  bool under_way = false;
  uint64_t received = 0, total = 0;
  for (size_t at = 0; at + sizeof(FragmentHeader) <= size; at += sizeof(FragmentHeader)) {
    FragmentHeader header;
    std::memcpy(&header, data + at, sizeof(header));
    if (!fragment_error(header, under_way, received, total, kMaxTotal).empty()) return 0;
    switch (header.kind) {
      case FragmentKind::first:
      case FragmentKind::fallback:
        if (header.total > kMaxTotal || header.bytes > kFragmentPayload ||
            header.bytes > header.total) {
          std::abort();
        }
        total = header.total;
        received = header.bytes;
        under_way = received < total;
        break;
      case FragmentKind::more:
        if (header.bytes > kFragmentPayload || received + header.bytes > total) std::abort();
        received += header.bytes;
        under_way = received < total;
        break;
      case FragmentKind::aborted:
        under_way = false;
        break;
      case FragmentKind::rendezvous:
      case FragmentKind::notice:
        break;
    }
  }
  return 0;
}
