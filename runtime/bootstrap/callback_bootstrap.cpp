#include "runtime/bootstrap/callback_bootstrap.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "base/status.h"

namespace ibcoll::runtime {

CallbackBootstrap::CallbackBootstrap(int rank, int size, FixedAllgather allgather)
    : rank_(rank), size_(size), allgather_(std::move(allgather)) {
  if (size < 1) throw Error(Code::invalid_argument, "size: " + std::to_string(size) + " < 1");
  if (rank < 0 || rank >= size) {
    throw Error(Code::invalid_argument,
                "rank: " + std::to_string(rank) + " is outside [0, " + std::to_string(size) + ")");
  }
  if (!allgather_) throw Error(Code::invalid_argument, "allgather: is null");
}

std::vector<std::string> CallbackBootstrap::allgather(const std::string& name,
                                                      const std::string& mine) {
  const auto n = static_cast<size_t>(size_);
  auto gather = [&](const void* in, void* out, size_t bytes) {
    if (!allgather_(in, out, bytes)) {
      throw Error(Code::peer_failed, "bootstrap: the caller's allgather failed (" + name + ")");
    }
  };
  const uint64_t length = mine.size();
  std::vector<uint64_t> lengths(n);
  gather(&length, lengths.data(), sizeof(length));
  const size_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::string padded = mine;
  padded.resize(longest);
  std::string all(longest * n, '\0');
  if (longest > 0) gather(padded.data(), all.data(), longest);
  std::vector<std::string> out(n);
  for (size_t r = 0; r < n; ++r)
    out[r] = all.substr(r * longest, lengths[r]);
  return out;
}

}  // namespace ibcoll::runtime
