// PostedRecv: a receive posted and not yet matched, as a channel's MatchTable holds it.
#pragma once

#include <cstddef>

#include "transport/channel.h"

namespace ibcoll::transport {

struct PostedRecv {
  std::byte* buffer;
  size_t capacity;
  Completion done;
};

}  // namespace ibcoll::transport
