// A byte count as IBCOLL_* size variables are written (parse_size reads it back): "2M", "64K",
// "1000".
#pragma once

#include <cstddef>
#include <string>

namespace ibcoll {

inline std::string size_text(size_t bytes) {
  const char* units = "KMG";
  int unit = -1;
  while (unit < 2 && bytes != 0 && bytes % 1024 == 0)
    bytes /= 1024, ++unit;
  return std::to_string(bytes) + (unit < 0 ? "" : std::string(1, units[unit]));
}

}  // namespace ibcoll
