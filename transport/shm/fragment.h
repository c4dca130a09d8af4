// What travels in a ring slot (ring.h) between two local ranks: a FragmentHeader, then up to
// kFragmentPayload bytes. A message is its first fragment and the `more` ones after it, back to
// back in its pair's ring; a rendezvous is one fragment saying where the bytes lie. The
// receiver checks every header it reads (fragment_error) before trusting a field of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "transport/shm/ring.h"

namespace ibcoll::transport::shm {

enum class FragmentKind : uint32_t {
  more,        // a later fragment of the message being copied through
  first,       // the first fragment of a message for (peer, tag)
  rendezvous,  // a message to read from the sender: tag, total, then a RemoteMessage
  fallback,    // the first fragment of refused rendezvous `tag` (its id), copied through
  aborted,     // the message being copied through, or refused rendezvous `tag`, was withdrawn
  notice,      // a Notice: `tag` its subject, `total` its kind and detail; between messages
};

struct FragmentHeader {
  uint64_t tag;    // or, for a fallback or an aborted rendezvous, the rendezvous id
  uint64_t total;  // bytes of the whole message
  uint32_t bytes;  // bytes in this fragment
  FragmentKind kind;
};

struct RemoteMessage {
  uint64_t id;       // the sender's, to answer with
  uint64_t address;  // where the bytes lie in the sender
  uint64_t length;
};

constexpr size_t kFragmentPayload = Ring::kSlotBytes - sizeof(FragmentHeader);

// What is wrong with `header`, given whether a message is under way from its sender (with
// `received` of `total` bytes in); empty if nothing. `max_total`: the largest message.
inline std::string fragment_error(const FragmentHeader& header, bool under_way, uint64_t received,
                                  uint64_t total, uint64_t max_total) {
  switch (header.kind) {
    case FragmentKind::rendezvous:
      if (under_way) return "a rendezvous inside another message";
      if (header.bytes != sizeof(RemoteMessage)) return "a rendezvous of the wrong size";
      return {};
    case FragmentKind::first:
    case FragmentKind::fallback:
      if (under_way) return "a message begun inside another";
      if (header.total > max_total)
        return "a message of " + std::to_string(header.total) + " bytes";
      if (header.bytes > kFragmentPayload || header.bytes > header.total) {
        return "a first fragment of " + std::to_string(header.bytes) + " bytes";
      }
      return {};
    case FragmentKind::more:
      if (!under_way) return "a continued fragment with no message under way";
      if (header.bytes > kFragmentPayload || header.bytes > total - received) {
        return "a fragment of " + std::to_string(header.bytes) + " bytes, with " +
               std::to_string(total - received) + " to come";
      }
      return {};
    case FragmentKind::aborted:
      return {};
    case FragmentKind::notice:
      if (under_way) return "a notice inside a message";
      return {};
  }
  return "an unknown kind " + std::to_string(static_cast<uint32_t>(header.kind));
}

}  // namespace ibcoll::transport::shm
