// Every work request's wr_id says what completed: a kind in the top byte, an index below it.
#pragma once

#include <cstdint>

namespace ibcoll::transport::verbs {

// probe: a keepalive (a zero-length RDMA write), its index the peer's rank.
enum class WorkKind : uint8_t { srq_receive = 1, ud_receive, send, ud_send, rdma_write, probe };

constexpr uint64_t make_work_id(WorkKind kind, uint64_t index) {
  return (uint64_t{static_cast<uint8_t>(kind)} << 56) | (index & ((uint64_t{1} << 56) - 1));
}
constexpr WorkKind work_kind(uint64_t id) {
  return static_cast<WorkKind>(id >> 56);
}
constexpr uint64_t work_index(uint64_t id) {
  return id & ((uint64_t{1} << 56) - 1);
}

}  // namespace ibcoll::transport::verbs
