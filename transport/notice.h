// Notice: a few words of news between two ranks, delivered whatever the receiver has posted
// (no receive matches it): a rank of the job is gone, a communicator was revoked, a member is
// alive and waiting in an agreement. Every
// transport carries one as a header-only message of its own kind, `subject` where a message's
// tag goes and kind and detail packed where its length goes.
#pragma once

#include <cstdint>
#include <optional>

namespace ibcoll::transport {

struct Notice {
  enum class Kind : uint32_t {
    rank_gone = 1,  // job rank `subject` is gone; `detail`: why, a Code
    revoked = 2,    // the communicator whose key is `subject` was revoked by job rank `detail`
    agreeing = 3,   // the teller is alive in agreement `detail` of the communicator `subject`
  };
  Kind kind = Kind::rank_gone;
  uint64_t subject = 0;
  uint32_t detail = 0;

  uint64_t packed() const { return static_cast<uint64_t>(kind) << 32 | detail; }
  // The notice a transport read, or null for a kind this build does not know.
  static std::optional<Notice> unpacked(uint64_t subject, uint64_t packed) {
    const auto kind = static_cast<Kind>(packed >> 32);
    if (kind != Kind::rank_gone && kind != Kind::revoked && kind != Kind::agreeing)
      return std::nullopt;
    return Notice{kind, subject, static_cast<uint32_t>(packed)};
  }
};

}  // namespace ibcoll::transport
