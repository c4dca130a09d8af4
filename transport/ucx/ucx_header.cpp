#include "transport/ucx/ucx_header.h"

#include <cstring>

namespace ibcoll::transport::ucx {

std::optional<UcxHeader> parse_header(const void* bytes, size_t size) {
  UcxHeader header;
  if (!bytes || size != sizeof(header)) return std::nullopt;
  std::memcpy(&header, bytes, sizeof(header));
  if (header.magic != UcxHeader::kMagic || header.version != UcxHeader::kVersion) {
    return std::nullopt;
  }
  const auto type = static_cast<uint8_t>(header.type);
  if (type < static_cast<uint8_t>(UcxHeader::Type::eager) ||
      type > static_cast<uint8_t>(UcxHeader::Type::probe)) {
    return std::nullopt;
  }
  return header;
}

}  // namespace ibcoll::transport::ucx
