// Helpers for transport tests: recorded transfers, deterministic payloads, and an all-to-all
// exchange over any channel (every rank sends one message of each size to every other rank,
// receives theirs, and checks statuses, lengths and every byte).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/job.h"
#include "tests/support/forked_ranks.h"
#include "transport/channel.h"

namespace ibcoll::testing {

struct Transfer {
  std::vector<std::byte> buffer;
  bool done = false;
  Status status;
  size_t bytes = 0;
};

inline transport::Completion record(Transfer& t) {
  return [&t](const Status& s, size_t bytes) {
    t.done = true;
    t.status = s;
    t.bytes = bytes;
  };
}

// Deterministic test bytes, different for every (source, destination, tag, position).
inline std::byte pattern_byte(int source, int destination, uint64_t tag, size_t i) {
  uint64_t x = (uint64_t(source) * 0x9E3779B1u) ^ (uint64_t(destination) << 20) ^ (tag << 40) ^ i;
  x ^= x >> 13;
  x *= 0xff51afd7ed558ccdull;
  return static_cast<std::byte>(x >> 56);
}

// Polls `channel` for `duration`, whatever arrives.
inline void poll_for(transport::Channel& channel, std::chrono::milliseconds duration) {
  const auto end = std::chrono::steady_clock::now() + duration;
  while (std::chrono::steady_clock::now() < end)
    channel.poll();
}

// Fails the rank (RANK_CHECK) on any wrong status, length or byte.
inline void exchange_all_to_all(runtime::Job& job, transport::Channel& channel,
                                const std::vector<size_t>& sizes) {
  const int me = job.rank(), n = job.size();
  std::vector<Transfer> sends, recvs;
  sends.reserve(sizes.size() * n);
  recvs.reserve(sizes.size() * n);
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    for (size_t t = 0; t < sizes.size(); ++t) {
      Transfer& in = recvs.emplace_back();
      in.buffer.resize(sizes[t]);
      channel.recv(peer, t, in.buffer.data(), in.buffer.size(), record(in));
      Transfer& out = sends.emplace_back();
      out.buffer.resize(sizes[t]);
      for (size_t i = 0; i < sizes[t]; ++i)
        out.buffer[i] = pattern_byte(me, peer, t, i);
      channel.send(peer, t, out.buffer.data(), out.buffer.size(), record(out));
    }
  }
  job.wait(
      [&] {
        for (auto& t : sends)
          if (!t.done) return false;
        for (auto& t : recvs)
          if (!t.done) return false;
        return true;
      },
      "all-to-all exchange");
  size_t k = 0;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == me) continue;
    for (size_t t = 0; t < sizes.size(); ++t, ++k) {
      const std::string what = "peer " + std::to_string(peer) + " size " + std::to_string(sizes[t]);
      RANK_CHECK(sends[k].status.ok(), what + ": " + sends[k].status.to_string());
      RANK_CHECK(recvs[k].status.ok(), what + ": " + recvs[k].status.to_string());
      RANK_CHECK(recvs[k].bytes == sizes[t], what + ": got " + std::to_string(recvs[k].bytes));
      for (size_t i = 0; i < sizes[t]; ++i) {
        RANK_CHECK(recvs[k].buffer[i] == pattern_byte(peer, me, t, i),
                   what + ": wrong byte at " + std::to_string(i));
      }
    }
  }
}

}  // namespace ibcoll::testing
