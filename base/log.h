// The one logger. Level from IBCOLL_LOG (set by runtime config); lines go to stderr prefixed
// with the process's rank tag so interleaved output from many ranks stays readable.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace ibcoll::log {

enum class Level { error = 0, warn, info, debug, trace };

void set_level(Level level);
Level level();
// Parses "error|warn|info|debug|trace"; throws Error(invalid_argument) on anything else.
Level parse_level(std::string_view text);
void set_tag(std::string tag);  // e.g. "rank 3"
void write(Level level, const std::string& message);

inline bool enabled(Level l) {
  return static_cast<int>(l) <= static_cast<int>(level());
}

}  // namespace ibcoll::log

// Streams are evaluated only when the level is enabled.
#define IBCOLL_LOG(lvl, expr)                                                    \
  do {                                                                           \
    if (::ibcoll::log::enabled(::ibcoll::log::Level::lvl)) {                     \
      std::ostringstream ibcoll_log_stream_;                                     \
      ibcoll_log_stream_ << expr;                                                \
      ::ibcoll::log::write(::ibcoll::log::Level::lvl, ibcoll_log_stream_.str()); \
    }                                                                            \
  } while (0)
