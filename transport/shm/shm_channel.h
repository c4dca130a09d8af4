// ShmChannel: the Channel between ranks of one node, through a SharedSegment. Each ordered
// pair of ranks has a Ring; a message travels as fragments of up to a slot each (a header
// saying tag and total length, then bytes), so messages of any size are copied through in a
// pipeline, in order per pair. Receivers match the first fragment by (peer, tag); fragments
// of a message nobody waits for yet collect in the unexpected queue. A peer whose process has
// exited (checked while something waits on it) fails every operation with it.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <memory>
#include <tuple>
#include <vector>

#include "transport/channel.h"
#include "transport/deferred_completions.h"
#include "transport/match_table.h"
#include "transport/shm/ring.h"
#include "transport/shm/segment.h"
#include "transport/shm/slot_region.h"

namespace ibcoll::transport::shm {

class ShmChannel final : public Channel {
 public:
  // Bytes of the segment for `size` local ranks.
  static size_t segment_bytes(int size);

  // Every local rank passes the same (attached) segment; `liveness_interval` is how often a
  // waiting rank checks that its peers' processes still exist.
  ShmChannel(int rank, int size, SharedSegment segment,
             std::chrono::milliseconds liveness_interval = std::chrono::milliseconds(100));

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t max_message_size() const override { return size_t{1} << 40; }
  void send(int peer, uint64_t tag, const void* buffer, size_t length, Completion done) override;
  void recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) override;
  void cancel_receives(uint64_t first, uint64_t last) override;
  const Status* peer_failure(int peer) const override {
    const auto& p = peers_[static_cast<size_t>(peer)];
    return p.failed ? &p.failure : nullptr;
  }
  int poll() override;
  // The flag/slot region of the node's segment, for node-local collectives.
  const SlotRegion& slots() const { return slots_; }

 private:
  struct FragmentHeader {
    uint64_t tag;
    uint64_t total;  // bytes of the whole message
    uint32_t bytes;  // bytes in this fragment
    uint32_t first;  // 1 on a message's first fragment
  };
  static constexpr size_t kFragmentPayload = Ring::kSlotBytes - sizeof(FragmentHeader);

  struct SendOp {
    uint64_t tag;
    const std::byte* data;
    size_t length;
    size_t sent = 0;
    Completion done;
  };
  struct PostedRecv {
    std::byte* buffer;
    size_t capacity;
    Completion done;
  };
  // A message that arrived (or is arriving) before its receive was posted.
  struct Unexpected {
    std::vector<std::byte> bytes;
    size_t received = 0;
    std::unique_ptr<PostedRecv> waiter;  // a receive that matched it before it was complete
  };
  using Arrival = std::shared_ptr<Unexpected>;
  // The message a peer is in the middle of delivering to us.
  struct Incoming {
    bool active = false;
    uint64_t total = 0, received = 0;
    PostedRecv posted{};  // when a receive was waiting
    Arrival unexpected;   // otherwise
  };
  struct Peer {
    Peer(Ring to_peer, Ring from_peer) : to(to_peer), from(from_peer) {}
    Ring to, from;  // our ring to the peer, the peer's ring to us
    std::deque<SendOp> outgoing;
    Incoming incoming;
    size_t waiting = 0;  // posted receives for this peer
    bool failed = false;
    Status failure;
  };

  int drain(int peer);
  int fill(int peer);
  void on_fragment(int peer, const FragmentHeader& header, const std::byte* payload);
  void finish(int peer, PostedRecv& recv, uint64_t total);
  void check_liveness();
  void fail_peer(int peer, const Status& status);
  pid_t* pids() const { return reinterpret_cast<pid_t*>(segment_.data()); }

  int rank_, size_;
  SharedSegment segment_;
  std::chrono::milliseconds liveness_interval_;
  SlotRegion slots_;
  std::vector<Peer> peers_;
  MatchTable<PostedRecv, Arrival> matches_;
  DeferredCompletions completions_;
  uint32_t polls_since_check_ = 0;
  std::chrono::steady_clock::time_point next_check_{};
};

}  // namespace ibcoll::transport::shm
