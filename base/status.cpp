#include "base/status.h"

#include <cstring>

namespace ibcoll {

const char* code_name(Code code) {
  switch (code) {
    case Code::ok:
      return "ok";
    case Code::invalid_argument:
      return "invalid argument";
    case Code::not_supported:
      return "not supported";
    case Code::system_error:
      return "system error";
    case Code::timeout:
      return "timeout";
    case Code::peer_failed:
      return "peer failed";
    case Code::truncated:
      return "truncated";
    case Code::mismatch:
      return "mismatch";
    case Code::internal:
      return "internal error";
    case Code::revoked:
      return "revoked";
    case Code::fenced:
      return "fenced";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(code_name(code_)) + ": " + message_;
}

void throw_errno(const std::string& what, int err) {
  throw Error(Code::system_error,
              what + " failed: " + std::strerror(err) + " (errno " + std::to_string(err) + ")");
}

}  // namespace ibcoll
