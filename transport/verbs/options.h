// Settings of the verbs transport. runtime/config fills them from IBCOLL_* variables; tests
// may build them directly.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace ibcoll::transport::verbs {

enum class XrcMode { automatic, on, off };
enum class ConnectMode { ud, rdmacm };
// IBCOLL_MR_CACHE: auto keeps user buffers registered where unmaps are reported (UnmapWatch).
enum class CacheMode { automatic, on, off };

// Keepalive intervals a peer may stay silent (a probe unacknowledged, a handshake unanswered)
// before it is judged.
constexpr int kUnansweredProbes = 4;

struct Options {
  std::string device;  // "name" or "name:port"; empty: the first device with an active port
  int gid_index = -1;  // -1: prefer an IPv4-mapped RoCE v2 GID
  XrcMode xrc = XrcMode::automatic;
  ConnectMode connect = ConnectMode::ud;
  size_t eager_limit = 64 << 10;  // larger messages go by rendezvous (RDMA write with immediate)
  size_t eager_buffer = 8 << 10;  // one send slot or SRQ buffer: longer eager messages go in parts
  uint32_t srq_depth = 512;       // receive buffers in the one shared receive queue
  uint32_t credits = 32;          // per-peer cap on unacknowledged messages into our SRQ
  CacheMode mr_cache = CacheMode::automatic;  // keep user buffers registered between transfers
  size_t mr_cache_bytes = size_t{1} << 30;
  std::chrono::milliseconds timeout{60000};        // connection set-up and liveness
  std::chrono::milliseconds handshake_retry{200};  // resend an unanswered handshake
  std::chrono::milliseconds keepalive{1000};       // probe a quiet peer we wait on
  bool event_channel = false;  // create a completion channel (IBCOLL_WAIT=event)
  // For tests (IBCOLL_FAULT=qp-error:N): the QP of the Nth work request posted goes into error
  // right after it; 0: never.
  uint64_t error_qp_after = 0;
  std::string xrc_domain_file;  // the job's, shared by its processes on a node (xrc_domain.h)
  // Why a peer is known gone (its process ended), or empty; asked now and then about a peer
  // whose handshake goes unanswered, which a busy peer cannot tell from a dead one. Set by the
  // runtime from what its bootstrap knows; unset, such a peer is waited for.
  std::function<std::string(int peer)> why_gone;
};

const char* xrc_mode_name(XrcMode mode);
XrcMode parse_xrc_mode(const std::string& text);          // throws Error(invalid_argument)
ConnectMode parse_connect_mode(const std::string& text);  // throws Error(invalid_argument)

}  // namespace ibcoll::transport::verbs
