#include "transport/channel.h"

#include <string>

namespace ibcoll::transport {

void Channel::check_peer(int peer, const char* call) const {
  if (peer < 0 || peer >= size()) {
    throw Error(Code::invalid_argument, std::string(call) + ": peer " + std::to_string(peer) +
                                            " is outside [0, " + std::to_string(size()) + ")");
  }
  if (peer == rank()) {
    throw Error(Code::invalid_argument,
                std::string(call) + ": peer " + std::to_string(peer) + " is this process");
  }
}

void Channel::check_send(int peer, const void* buffer, size_t length,
                         const Completion& done) const {
  check_peer(peer, "send");
  if (!buffer && length > 0) {
    throw Error(Code::invalid_argument,
                "send: buffer is null but length is " + std::to_string(length));
  }
  if (length > max_message_size()) {
    throw Error(Code::invalid_argument, "send: length " + std::to_string(length) +
                                            " exceeds the largest message, " +
                                            std::to_string(max_message_size()));
  }
  if (!done) throw Error(Code::invalid_argument, "send: no completion callback");
}

void Channel::check_recv(int peer, const void* buffer, size_t capacity,
                         const Completion& done) const {
  check_peer(peer, "recv");
  if (!buffer && capacity > 0) {
    throw Error(Code::invalid_argument,
                "recv: buffer is null but capacity is " + std::to_string(capacity));
  }
  if (!done) throw Error(Code::invalid_argument, "recv: no completion callback");
}

void Channel::hold_failed(int peer, const Status& why) {
  (void)why;
  throw Error(Code::internal, "this channel cannot hold peer " + std::to_string(peer) + " failed");
}

void Channel::fence(int peer, const Status& why) {
  hold_failed(peer, why);
}

Status Channel::receive_status(int peer, uint64_t message_bytes, size_t capacity) {
  if (message_bytes <= capacity) return {};
  return Status(Code::truncated, "recv from peer " + std::to_string(peer) + ": message of " +
                                     std::to_string(message_bytes) + " bytes, buffer of " +
                                     std::to_string(capacity));
}

Status Channel::withdrawn(int peer, const char* who) {
  return Status(Code::peer_failed, "peer " + std::to_string(peer) + "'s " + who +
                                       " gave the message up before it was delivered (its call "
                                       "ended)");
}

}  // namespace ibcoll::transport
