// libFuzzer target: the UCX channel's active-message header, as a peer's message delivers it.
// A header that parses has ibcoll's magic and version and one of the channel's types.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "transport/ucx/ucx_header.h"

using ibcoll::transport::ucx::UcxHeader;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (const auto header = ibcoll::transport::ucx::parse_header(data, size)) {
    const auto type = static_cast<uint8_t>(header->type);
    if (size != sizeof(UcxHeader) || header->magic != UcxHeader::kMagic ||
        type < static_cast<uint8_t>(UcxHeader::Type::eager) ||
        type > static_cast<uint8_t>(UcxHeader::Type::probe)) {
      std::abort();
    }
  }
  return 0;
}
