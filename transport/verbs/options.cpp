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

}  // namespace ibcoll::transport::verbs
