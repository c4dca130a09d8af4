// ShmChannel: the Channel between ranks of one node, through a SharedSegment. Each ordered
// pair of ranks has a Ring; a message travels as fragments of up to a slot each (a header
// saying kind, tag and total length, then bytes), so messages of any size are copied through
// in a pipeline, in order per pair. Receivers match the first fragment by (peer, tag);
// fragments of a message nobody waits for yet collect in the unexpected queue.
//
// Large messages go by single copy instead: the sender publishes only where the message lies
// (a rendezvous), the receiver copies it straight from the sender's memory into its buffer
// (process_vm_readv) once its receive is posted, and answers "done" in the pair's Answers
// table, which completes the send. Where the kernel refuses (containers' seccomp profiles,
// Yama), it answers "refused" and the sender copies that message, and every later one, through
// the ring.
//
// A poll visits only the peers this rank sends to or hears from: before its first fragment to a
// peer, a rank sets its bit in that peer's bitmap of senders, which every poll reads (a word per
// 64 local ranks: one cache line up to 512). With a ring per ordered pair, polling every ring read
// a page per local rank on each poll, and kept L² pages of the segment in memory.
//
// A peer whose process has exited (checked while something waits on it) fails every operation
// with it; so does one that has left because a part it needed found no room in /dev/shm (it
// sets its bit in the segment's bitmap of ranks out of room, and fails all its own operations).
//
// cancel() withdraws operations: a send not begun is forgotten; one begun in the ring, or whose
// copy through the ring the receiver awaits, is followed by an `aborted` fragment, and its
// receive fails; a rendezvous is withdrawn in its Answers entry unless the receiver has claimed
// it for reading (then the read is waited for). A receive withdrawn midway drops the rest.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <memory_resource>
#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/fifo.h"
#include "transport/channel.h"
#include "transport/deferred_completions.h"
#include "transport/match_table.h"
#include "transport/message_pool.h"
#include "transport/pooled_bytes.h"
#include "transport/shm/answers.h"
#include "transport/shm/fragment.h"
#include "transport/shm/options.h"
#include "transport/shm/ring.h"
#include "transport/shm/segment.h"
#include "transport/shm/slot_region.h"
#include "transport/withdrawn_tags.h"

namespace ibcoll::transport::shm {

class ShmChannel final : public Channel {
 public:
  // Bytes of the segment for `size` local ranks, and of it what the ranks' idle polls read.
  static size_t segment_bytes(int size);
  static size_t polled_bytes(int size);
  // The page of the rank's pids, at the segment's start.
  static constexpr size_t control_bytes() { return 4096; }
  // Where the ring from local rank `from` to `to` lies in such a segment.
  static size_t ring_offset(int from, int to, int size);

  // Gives pages to what every local rank touches as soon as it attaches (its pid, the bitmaps of
  // senders, the slot directory) and, where the first two calibrate single copy at start-up,
  // their rings (a calibration failing on one side would leave the other waiting out its
  // deadline); its creator's part of the set-up. The other rings get theirs at first use (their
  // counters and answer tables when a sender first sends, each slot when first filled).
  // Error(system_error) naming /dev/shm if it has no room.
  static void commit_shared_parts(const SharedSegment& segment, int size, bool first_two_talk);
  // Every local rank passes the same (attached) segment.
  ShmChannel(int rank, int size, SharedSegment segment, ShmOptions options = {});

  // Errors and logs name peer i as "rank job_ranks[i]" (the job's numbering), not "peer i".
  void name_peers(std::vector<int> job_ranks);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t max_message_size() const override { return size_t{1} << 40; }
  void cancel(uint64_t first, uint64_t last) override;
  // One fragment through the ring (not read from the sender's memory).
  bool unaided(int, size_t bytes) const override {
    return !options_.single_copy.holds(bytes) && bytes + sizeof(FragmentHeader) <= Ring::kSlotBytes;
  }
  const Status* peer_failure(int peer) const override {
    const auto& p = peers_[static_cast<size_t>(peer)];
    return p.failed ? &p.failure : nullptr;
  }
  void tell(int peer, const Notice& notice) override;
  void tell_peers(const Notice& notice) override;
  bool notices_pending() const override;
  // Whether a rank of the node (this one too) has left for want of room in /dev/shm.
  bool a_rank_left() const;
  int poll() override;
  // Messages waiting for their receive now, and the heap memory their pool holds.
  size_t early_arrivals() const { return matches_.unexpected_count(); }
  size_t early_arrival_bytes() const { return early_arrivals_.held_bytes(); }
  // The flag/slot region of the node's segment, for node-local collectives.
  const SlotRegion& slots() const { return slots_; }
  const SharedSegment& segment() const { return segment_; }
  // The message sizes that go by single copy, and why (in words).
  const SingleCopySizes& single_copy() const { return options_.single_copy; }
  const std::string& single_copy_origin() const { return single_copy_origin_; }
  void set_single_copy(const SingleCopySizes& sizes, std::string origin = {}) {
    options_.single_copy = sizes;
    single_copy_origin_ = std::move(origin);
  }
  // False once `peer` has refused to read this rank's memory (then everything goes by the rings).
  bool single_copy_possible(int peer) const {
    return peers_[static_cast<size_t>(peer)].single_copy;
  }

 private:
  void post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                 Completion done) override;
  void post_recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) override;
  using Kind = FragmentKind;

  struct SendOp {
    Kind kind;        // of the first fragment: first, rendezvous, fallback or aborted
    uint64_t tag;     // the message's
    uint64_t id = 0;  // rendezvous (and fallback): its id; aborted: the fragment's tag field
    const std::byte* data = nullptr;
    size_t length = 0;
    size_t sent = 0;
    Completion done;
  };
  // A receive; withdrawn (cancel) it keeps its tag and nothing else, so what still comes for
  // it is dropped.
  struct PostedRecv {
    std::byte* buffer;
    size_t capacity;
    Completion done;
    uint64_t tag;
  };
  // A message that arrived (or is arriving) before its receive was posted.
  struct Unexpected {
    std::optional<RemoteMessage> remote;  // a rendezvous: nothing copied until a receive
    PooledBytes bytes;                    // uninitialised: the fragments fill it
    size_t total = 0;
    size_t received = 0;
    std::optional<PostedRecv> waiter;  // a receive that matched it before it was complete
    bool aborted = false;              // the sender withdrew it midway
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
    Peer(Ring to_peer, Ring from_peer, Answers ours, Answers theirs)
        : to(to_peer), from(from_peer), answers(ours), answers_to_peer(theirs) {}
    Ring to, from;            // our ring to the peer, the peer's ring to us
    Answers answers;          // to our rendezvous, written by the peer
    Answers answers_to_peer;  // to the peer's rendezvous, written by us
    Fifo<SendOp> outgoing;
    Incoming incoming;
    bool single_copy = true;           // until the peer refuses a rendezvous
    bool refused_single_copy = false;  // we could not read the peer (said once)
    uint64_t next_rendezvous = 0;
    std::unordered_map<uint64_t, SendOp> awaiting_answer;    // rendezvous sent, by id
    std::unordered_map<uint64_t, PostedRecv> awaiting_copy;  // rendezvous refused, by id
    size_t waiting = 0;                                      // posted receives for this peer
    bool announced = false;        // our bit is set in the peer's bitmap of senders
    uint32_t committed_slots = 0;  // bit i: slot i of our ring to the peer has its pages
    bool polled = false;           // in polled_
    bool failed = false;
    Status failure;
  };

  int drain(int peer);
  int fill(int peer);
  // The word of `receiver`'s bitmap of senders that holds `sender`'s bit.
  std::atomic_ref<uint64_t> sender_word(int receiver, int sender) const;
  // Gives pages to the counters of the rings between local ranks `from` and `to`, both ways,
  // and to the table of answers to `from`'s rendezvous.
  static void commit_pair(const SharedSegment& segment, int size, int from, int to,
                          const std::string& whom);
  void poll_peer(int peer);
  void find_new_senders();
  // False when the front op is a rendezvous that must wait for a free Answers entry.
  bool publish(Peer& p, std::byte* slot, SendOp& op);
  int collect_answers(int peer);
  void on_fragment(int peer, const FragmentHeader& header, const std::byte* payload);
  void on_data(int peer, const FragmentHeader& header, const std::byte* payload);
  // Reads a rendezvous into a posted receive, or asks for it to be copied through.
  void read_remote(int peer, const RemoteMessage& remote, PostedRecv posted);
  void finish(int peer, PostedRecv& recv, uint64_t total);
  // A new early arrival, from the channel's pool.
  Arrival new_arrival() {
    return std::allocate_shared<Unexpected>(
        std::pmr::polymorphic_allocator<Unexpected>(&early_arrivals_));
  }
  // The message arriving from `peer` (or refused rendezvous `id`, if none) was withdrawn.
  void on_aborted(int peer, uint64_t id);
  // cancel() for one peer's sends.
  void withdraw_sends(int peer, uint64_t first, uint64_t last);
  Status withdrawn(int peer) const;
  void check_liveness();
  void find_the_dead();  // every local peer that exited or left is failed, with its reason
  // `gone`: its process has exited or left (the observer hears of it), not merely misbehaved.
  void fail_peer(int peer, const Status& status, bool gone = false);
  void drop_peer(int peer, const Status& status);  // fail_peer's work, unlogged
  // A peer whose process has exited: the rings between it and this rank go back to the kernel
  // (their answer tables, under a page each, stay). Nobody touches them again: this rank reads
  // and writes no failed peer's ring.
  void give_back_pair(int peer);
  void leave_for_want_of_room(const Status& why);
  // The word of the bitmap of ranks out of room that holds `rank`'s bit.
  std::atomic_ref<uint64_t> roomless_word(int rank) const;
  pid_t* pids() const { return reinterpret_cast<pid_t*>(segment_.data()); }

  std::string who(int peer) const;  // "rank 12" (or "peer 3" when unnamed), for messages

  int rank_, size_;
  std::vector<int> job_ranks_;  // per peer, when named
  SharedSegment segment_;
  ShmOptions options_;
  std::string single_copy_origin_;  // why options_.single_copy is what it is
  SlotRegion slots_;
  // The early arrivals (their records and bytes), kept from one message to the next: a steady
  // stream of them allocates nothing. Declared before the peers and the queues that hold them.
  MessagePool early_arrivals_;
  WithdrawnTags withdrawn_tags_;  // what arrives for these is dropped
  std::vector<Peer> peers_;
  std::vector<int> polled_;             // the peers poll() visits
  std::vector<uint64_t> seen_senders_;  // our bitmap of senders as last read
  MatchTable<PostedRecv, Arrival> matches_;
  DeferredCompletions completions_;
  uint32_t polls_since_check_ = 0;
  std::chrono::steady_clock::time_point next_check_{};
  std::vector<std::pair<int, Notice>> words_heard_;  // deaths told in this poll, and by whom
};

}  // namespace ibcoll::transport::shm
