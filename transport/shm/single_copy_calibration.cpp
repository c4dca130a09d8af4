#include "transport/shm/single_copy_calibration.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <vector>

#include "base/size_text.h"

namespace ibcoll::transport::shm {
namespace {

constexpr std::array<size_t, 7> kSizes = {size_t{8} << 10,   size_t{16} << 10, size_t{64} << 10,
                                          size_t{256} << 10, size_t{1} << 20,  size_t{2} << 20,
                                          size_t{4} << 20};
// A path must take at most this share of the other's time to be switched to: near a tie the
// choice would flip from run to run with the noise.
constexpr double kMargin = 0.9;
constexpr uint64_t kTag = 1;  // the channel is new: no other message is under way

// Drives the channel until `flag` is set; the peer's failure ends it with its status.
void wait_for(ShmChannel& channel, const bool& flag, const Status& status,
              const Deadline& deadline) {
  while (!flag) {
    channel.poll();
    if (deadline.expired()) {
      throw Error(Code::timeout, "single-copy calibration: no answer from the peer in time");
    }
  }
  if (!status.ok()) throw Error(status);
}

// One message each way of `bytes`; the time of the round trip on the leader.
double round_trip_ns(ShmChannel& channel, int peer, bool leader, std::byte* out, std::byte* in,
                     size_t bytes, const Deadline& deadline) {
  bool sent = false, received = false;
  Status send_status, recv_status;
  auto on_send = [&](const Status& s, size_t) { sent = true, send_status = s; };
  auto on_recv = [&](const Status& s, size_t) { received = true, recv_status = s; };
  const auto start = Clock::now();
  if (leader) {
    channel.send(peer, kTag, out, bytes, on_send);
    channel.recv(peer, kTag, in, bytes, on_recv);
    wait_for(channel, received, recv_status, deadline);
    wait_for(channel, sent, send_status, deadline);
  } else {
    channel.recv(peer, kTag, in, bytes, on_recv);
    wait_for(channel, received, recv_status, deadline);
    channel.send(peer, kTag, out, bytes, on_send);
    wait_for(channel, sent, send_status, deadline);
  }
  return std::chrono::duration<double, std::nano>(Clock::now() - start).count();
}

// Timed round trips per size and path (the best counts): fewer where each moves megabytes.
int rounds_at(size_t bytes) {
  return bytes < (size_t{1} << 20) ? 5 : 3;
}

// This side's byte for the other's, so that both take the same decision.
std::byte swap_byte(ShmChannel& channel, int peer, bool leader, std::byte mine,
                    const Deadline& deadline) {
  std::byte theirs{0};
  round_trip_ns(channel, peer, leader, &mine, &theirs, 1, deadline);
  return theirs;
}

// Both paths at `bytes`, best of a few one-way times each (meaningful on the leader only).
CopyTimes measure(ShmChannel& channel, int peer, bool leader, std::byte* out, std::byte* in,
                  size_t bytes, const Deadline& deadline) {
  CopyTimes t{bytes, 1e300, 1e300};
  for (double* best : {&t.rings_ns, &t.single_ns}) {
    channel.set_single_copy({best == &t.rings_ns ? size_t{0} : size_t{1}});
    for (int round = 0; round < rounds_at(bytes); ++round) {
      *best = std::min(*best, round_trip_ns(channel, peer, leader, out, in, bytes, deadline) / 2);
    }
  }
  return t;
}

}  // namespace

SingleCopySizes single_copy_sizes(std::span<const CopyTimes> ascending) {
  auto single_wins = [](const CopyTimes& t) { return t.single_ns <= kMargin * t.rings_ns; };
  auto rings_win = [](const CopyTimes& t) { return t.rings_ns <= kMargin * t.single_ns; };
  const auto first = std::find_if(ascending.begin(), ascending.end(), single_wins);
  if (first == ascending.end()) return {};
  const auto loss = std::find_if(first, ascending.end(), rings_win);
  return {first->bytes, loss == ascending.end() ? SingleCopySizes::kUnbounded : loss->bytes};
}

std::span<const size_t> single_copy_calibration_sizes() {
  return kSizes;
}

SingleCopyCalibration calibrate_single_copy(ShmChannel& channel, int peer, bool leader,
                                            const Deadline& deadline) {
  const SingleCopySizes kept = channel.single_copy();
  const std::string kept_origin = channel.single_copy_origin();
  const auto start = Clock::now();
  std::vector<std::byte> out(kSizes.back(), std::byte{1}), in(kSizes.back());
  std::vector<CopyTimes> times;
  try {
    // The rings' pages are touched for the first time here: a round trip larger than a ring by
    // each path first, or the rings pay the page faults.
    for (size_t from : {0, 1}) {
      channel.set_single_copy({from});
      round_trip_ns(channel, peer, leader, out.data(), in.data(), size_t{1} << 20, deadline);
    }
    // Up the sizes until the window has closed (a loss after a win): the leader says when.
    for (size_t bytes : kSizes) {
      times.push_back(measure(channel, peer, leader, out.data(), in.data(), bytes, deadline));
      const bool closed = leader && single_copy_sizes(times).below != SingleCopySizes::kUnbounded;
      const std::byte heard = swap_byte(channel, peer, leader, std::byte{closed}, deadline);
      if (leader ? closed : heard != std::byte{0}) break;
    }
  } catch (...) {
    channel.set_single_copy(kept, kept_origin);
    throw;
  }
  channel.set_single_copy(kept, kept_origin);
  // Each side knows whether the other could not read its memory; the leader hears the other's.
  const std::byte refused = static_cast<std::byte>(!channel.single_copy_possible(peer));
  const std::byte refused_there = swap_byte(channel, peer, leader, refused, deadline);
  if (!leader) return {};
  return {std::move(times), refused != std::byte{0} || refused_there != std::byte{0},
          std::chrono::duration<double, std::milli>(Clock::now() - start).count()};
}

SingleCopyVerdict single_copy_verdict(const SingleCopyCalibration& measured) {
  if (measured.refused) {
    return {{},
            "single copy does not work here: the kernel refused process_vm_readv between "
            "ranks"};
  }
  SingleCopyVerdict verdict{single_copy_sizes(measured.times), "one-way us, rings / single copy:"};
  for (const CopyTimes& t : measured.times) {
    char point[64];
    std::snprintf(point, sizeof(point), " %s %.1f / %.1f,", size_text(t.bytes).c_str(),
                  t.rings_ns / 1000, t.single_ns / 1000);
    verdict.summary += point;
  }
  char took[48];
  std::snprintf(took, sizeof(took), " in %.1f ms", measured.took_ms);
  verdict.summary.back() = ';';
  verdict.summary += took;
  if (verdict.sizes.from == 0) verdict.summary += "; single copy loses to the rings here";
  return verdict;
}

}  // namespace ibcoll::transport::shm
