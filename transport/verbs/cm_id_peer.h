// Which peer an rdma_cm id belongs to, kept in its `context` pointer. Peer p is stored as p + 1,
// so that a null context (the listener's, a request not yet taken) means no peer, and peer 0
// is not mistaken for none.
#pragma once

#include <cstdint>

namespace ibcoll::transport::verbs {

inline void* cm_context_of(int peer) {
  return reinterpret_cast<void*>(static_cast<intptr_t>(peer) + 1);
}

// The peer, or -1 for an id that has none.
inline int cm_peer_of(const void* context) {
  return static_cast<int>(reinterpret_cast<intptr_t>(context)) - 1;
}

}  // namespace ibcoll::transport::verbs
