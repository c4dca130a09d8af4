#include "transport/verbs/options.h"

#include "base/status.h"

namespace ibcoll::transport::verbs {

const char* xrc_mode_name(XrcMode mode) {
  switch (mode) {
    case XrcMode::automatic:
      return "auto";
    case XrcMode::on:
      return "on";
    case XrcMode::off:
      return "off";
  }
  return "?";
}

XrcMode parse_xrc_mode(const std::string& text) {
  if (text == "auto") return XrcMode::automatic;
  if (text == "on") return XrcMode::on;
  if (text == "off") return XrcMode::off;
  throw Error(Code::invalid_argument, "IBCOLL_XRC: unknown mode '" + text + "' (auto|on|off)");
}

ConnectMode parse_connect_mode(const std::string& text) {
  if (text == "ud") return ConnectMode::ud;
  if (text == "rdmacm") return ConnectMode::rdmacm;
  throw Error(Code::invalid_argument, "IBCOLL_CM: unknown mode '" + text + "' (ud|rdmacm)");
}

const char* cache_mode_name(CacheMode mode) {
  switch (mode) {
    case CacheMode::automatic:
      return "auto";
    case CacheMode::on:
      return "1";
    case CacheMode::off:
      return "0";
  }
  return "?";
}

CacheMode parse_cache_mode(const std::string& text) {
  if (text == "auto") return CacheMode::automatic;
  if (text == "1") return CacheMode::on;
  if (text == "0") return CacheMode::off;
  throw Error(Code::invalid_argument, "IBCOLL_MR_CACHE: unknown mode '" + text + "' (auto|0|1)");
}

}  // namespace ibcoll::transport::verbs
