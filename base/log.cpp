#include "base/log.h"

#include <atomic>
#include <cstdio>
#include <mutex>

#include "base/status.h"

namespace ibcoll::log {
namespace {

std::atomic<Level> g_level{Level::warn};
std::mutex g_mutex;
std::string g_tag;

const char* level_name(Level l) {
  switch (l) {
    case Level::error:
      return "error";
    case Level::warn:
      return "warn";
    case Level::info:
      return "info";
    case Level::debug:
      return "debug";
    case Level::trace:
      return "trace";
  }
  return "?";
}

}  // namespace

void set_level(Level l) {
  g_level.store(l, std::memory_order_relaxed);
}
Level level() {
  return g_level.load(std::memory_order_relaxed);
}

Level parse_level(std::string_view text) {
  for (Level l : {Level::error, Level::warn, Level::info, Level::debug, Level::trace}) {
    if (text == level_name(l)) return l;
  }
  throw Error(Code::invalid_argument, "IBCOLL_LOG: unknown level '" + std::string(text) +
                                          "' (expected error|warn|info|debug|trace)");
}

void set_tag(std::string tag) {
  std::lock_guard lock(g_mutex);
  g_tag = std::move(tag);
}

void write(Level l, const std::string& message) {
  std::lock_guard lock(g_mutex);
  std::fprintf(stderr, "ibcoll %s%s%s: %s\n", g_tag.c_str(), g_tag.empty() ? "" : " ",
               level_name(l), message.c_str());
}

}  // namespace ibcoll::log
