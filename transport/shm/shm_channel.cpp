#include "transport/shm/shm_channel.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/log.h"
#include "transport/shm/process.h"

namespace ibcoll::transport::shm {
namespace {

constexpr size_t kControlBytes = 4096;  // one pid per rank, then the rings
constexpr uint32_t kPollsPerClockRead = 64;

// Where the rings end (and the slot region starts, cache-line aligned).
size_t rings_end(int size) {
  return kControlBytes + static_cast<size_t>(size) * static_cast<size_t>(size) * Ring::kBytes;
}

}  // namespace

size_t ShmChannel::segment_bytes(int size) {
  return rings_end(size) + SlotRegion::bytes(size);
}

ShmChannel::ShmChannel(int rank, int size, SharedSegment segment,
                       std::chrono::milliseconds liveness_interval)
    : rank_(rank),
      size_(size),
      segment_(std::move(segment)),
      liveness_interval_(liveness_interval),
      slots_(segment_.data() + rings_end(size), size, pids()) {
  if (size < 1 || static_cast<size_t>(size) * sizeof(pid_t) > kControlBytes) {
    throw Error(Code::invalid_argument,
                "size: " + std::to_string(size) + " local ranks do not fit a shared segment");
  }
  if (rank < 0 || rank >= size) {
    throw Error(Code::invalid_argument,
                "rank: " + std::to_string(rank) + " is outside [0, " + std::to_string(size) + ")");
  }
  if (segment_.size() != segment_bytes(size)) {
    throw Error(Code::invalid_argument, "segment: " + std::to_string(segment_.size()) +
                                            " bytes, expected " +
                                            std::to_string(segment_bytes(size)));
  }
  auto ring = [&](int from, int to) {
    return Ring(segment_.data() + kControlBytes +
                (static_cast<size_t>(from) * static_cast<size_t>(size) + static_cast<size_t>(to)) *
                    Ring::kBytes);
  };
  for (int peer = 0; peer < size; ++peer)
    peers_.emplace_back(ring(rank, peer), ring(peer, rank));
  pids()[rank] = getpid();
}

void ShmChannel::send(int peer, uint64_t tag, const void* buffer, size_t length, Completion done) {
  check_send(peer, buffer, length, done);
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return completions_.add(std::move(done), p.failure, 0);
  p.outgoing.push_back({tag, static_cast<const std::byte*>(buffer), length, 0, std::move(done)});
  fill(peer);
}

void ShmChannel::recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) {
  check_recv(peer, buffer, capacity, done);
  Peer& p = peers_[static_cast<size_t>(peer)];
  PostedRecv posted{static_cast<std::byte*>(buffer), capacity, std::move(done)};
  if (auto arrival = matches_.take_unexpected({peer, tag})) {
    Unexpected& u = **arrival;
    if (u.received == u.bytes.size()) {
      if (const size_t n = std::min(capacity, u.bytes.size())) {
        std::memcpy(posted.buffer, u.bytes.data(), n);
      }
      return finish(peer, posted, u.bytes.size());
    }
    u.waiter = std::make_unique<PostedRecv>(std::move(posted));  // still arriving
    return;
  }
  if (p.failed) return completions_.add(std::move(posted.done), p.failure, 0);
  matches_.add_posted({peer, tag}, std::move(posted));
  ++p.waiting;
}

void ShmChannel::cancel_receives(uint64_t first, uint64_t last) {
  matches_.remove_posted(first, last,
                         [this](int peer) { --peers_[static_cast<size_t>(peer)].waiting; });
}

int ShmChannel::poll() {
  int events = 0;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || peers_[static_cast<size_t>(peer)].failed) continue;
    events += drain(peer);
    events += fill(peer);
  }
  if (++polls_since_check_ >= kPollsPerClockRead) {
    polls_since_check_ = 0;
    check_liveness();
  }
  return events + completions_.run();
}

int ShmChannel::drain(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  int fragments = 0;
  while (const std::byte* slot = p.from.slot_to_read()) {
    FragmentHeader header;
    std::memcpy(&header, slot, sizeof(header));
    on_fragment(peer, header, slot + sizeof(header));
    p.from.release();
    ++fragments;
  }
  return fragments;
}

int ShmChannel::fill(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  int fragments = 0;
  while (!p.outgoing.empty()) {
    std::byte* slot = p.to.slot_to_fill();
    if (!slot) break;
    SendOp& op = p.outgoing.front();
    const size_t bytes = std::min(kFragmentPayload, op.length - op.sent);
    const FragmentHeader header{op.tag, op.length, static_cast<uint32_t>(bytes), op.sent == 0};
    std::memcpy(slot, &header, sizeof(header));
    if (bytes) std::memcpy(slot + sizeof(header), op.data + op.sent, bytes);
    p.to.publish();
    op.sent += bytes;
    ++fragments;
    if (op.sent == op.length) {
      completions_.add(std::move(op.done), Status(), op.length);
      p.outgoing.pop_front();
    }
  }
  return fragments;
}

void ShmChannel::on_fragment(int peer, const FragmentHeader& header, const std::byte* payload) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  Incoming& in = p.incoming;
  if (header.first) {
    in = Incoming{true, header.total, 0, {}, nullptr};
    if (auto posted = matches_.take_posted({peer, header.tag})) {
      --p.waiting;
      in.posted = std::move(*posted);
    } else {
      in.unexpected = std::make_shared<Unexpected>();
      in.unexpected->bytes.resize(header.total);
      matches_.add_unexpected({peer, header.tag}, in.unexpected);
    }
  }
  const size_t offset = in.received;
  if (in.unexpected) {
    if (header.bytes) std::memcpy(in.unexpected->bytes.data() + offset, payload, header.bytes);
    in.unexpected->received += header.bytes;
  } else if (offset < in.posted.capacity) {
    std::memcpy(in.posted.buffer + offset, payload,
                std::min<size_t>(header.bytes, in.posted.capacity - offset));
  }
  in.received += header.bytes;
  if (in.received < in.total) return;
  if (!in.unexpected) {
    finish(peer, in.posted, in.total);
  } else if (in.unexpected->waiter) {  // a receive took it while it was arriving
    PostedRecv& waiter = *in.unexpected->waiter;
    if (const size_t n = std::min(waiter.capacity, in.total)) {
      std::memcpy(waiter.buffer, in.unexpected->bytes.data(), n);
    }
    finish(peer, waiter, in.total);
  }
  in = Incoming{};
}

void ShmChannel::finish(int peer, PostedRecv& recv, uint64_t total) {
  completions_.add(std::move(recv.done), receive_status(peer, total, recv.capacity),
                   std::min<size_t>(total, recv.capacity));
}

void ShmChannel::check_liveness() {
  const auto now = std::chrono::steady_clock::now();
  if (now < next_check_) return;
  next_check_ = now + liveness_interval_;
  // While anything is pending, every peer is checked: what we wait for may hang on another
  // peer's death (a collective waits on a partner that waits on the dead one).
  const bool busy = std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) {
    return p.waiting > 0 || !p.outgoing.empty() || p.incoming.active;
  });
  if (!busy) return;
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (peer == rank_ || p.failed) continue;
    const pid_t pid = pids()[peer];
    if (pid > 0 && !process_alive(pid)) {
      drain(peer);  // what it sent before it died is still good
      fail_peer(peer, Status(Code::peer_failed, "peer " + std::to_string(peer) + " (pid " +
                                                    std::to_string(pid) + ") has exited"));
    }
  }
}

void ShmChannel::fail_peer(int peer, const Status& status) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return;
  p.failed = true;
  p.failure = status;
  IBCOLL_LOG(warn, "peer " << peer << " failed: " << status.message());
  for (SendOp& op : p.outgoing)
    completions_.add(std::move(op.done), status, 0);
  p.outgoing.clear();
  if (p.incoming.active) {
    if (!p.incoming.unexpected) {
      completions_.add(std::move(p.incoming.posted.done), status, 0);
    } else if (p.incoming.unexpected->waiter) {
      completions_.add(std::move(p.incoming.unexpected->waiter->done), status, 0);
    }
    p.incoming = Incoming{};
  }
  matches_.fail_peer(peer, [&](PostedRecv& r) { completions_.add(std::move(r.done), status, 0); });
  p.waiting = 0;
}

}  // namespace ibcoll::transport::shm
