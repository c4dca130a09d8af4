#include "transport/shm/shm_channel.h"

#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "base/deadline.h"
#include "base/log.h"
#include "transport/shm/process.h"

namespace ibcoll::transport::shm {
namespace {

constexpr size_t kControlBytes = ShmChannel::control_bytes();  // one pid per rank, then rings
constexpr size_t kRingCounterBytes = 128;                      // a ring's head and tail
constexpr uint32_t kPollsPerClockRead = 64;

size_t pairs(int size) {
  return static_cast<size_t>(size) * static_cast<size_t>(size);
}
// After the rings: the answer tables, then each rank's bitmap of the ranks that have sent it
// something (a whole number of cache lines each), then the bitmap of the ranks that ran out of
// room; then (page aligned) the slot region.
size_t rings_end(int size) {
  return kControlBytes + pairs(size) * Ring::kBytes;
}
// The table of answers to `from`'s rendezvous with `to`.
size_t answers_offset(int from, int to, int size) {
  const size_t pair =
      static_cast<size_t>(from) * static_cast<size_t>(size) + static_cast<size_t>(to);
  return rings_end(size) + pair * Answers::kBytes;
}
size_t senders_offset(int size) {
  return rings_end(size) + pairs(size) * Answers::kBytes;
}
size_t sender_words(int size) {
  return (static_cast<size_t>(size) + 63) / 64;
}
size_t senders_stride(int size) {
  return (sender_words(size) * sizeof(uint64_t) + 63) / 64 * 64;
}
size_t roomless_offset(int size) {
  return senders_offset(size) + static_cast<size_t>(size) * senders_stride(size);
}
size_t slots_offset(int size) {
  const size_t bitmaps_end = roomless_offset(size) + senders_stride(size);
  return (bitmaps_end + 4095) / 4096 * 4096;
}

}  // namespace

size_t ShmChannel::segment_bytes(int size) {
  return slots_offset(size) + SlotRegion::bytes(size);
}

void ShmChannel::commit_shared_parts(const SharedSegment& segment, int size, bool first_two_talk) {
  segment.commit(segment.data(), kControlBytes, "the local ranks' pids");
  segment.commit(segment.data() + senders_offset(size), slots_offset(size) - senders_offset(size),
                 "the bitmaps of senders and of ranks out of room");
  segment.commit(segment.data() + slots_offset(size), SlotRegion::kDirectoryBytes,
                 "the slot directory");
  if (first_two_talk) {
    segment.commit(segment.data() + ring_offset(0, 1, size), Ring::kBytes, "local rank 0's ring");
    segment.commit(segment.data() + ring_offset(1, 0, size), Ring::kBytes, "local rank 1's ring");
    commit_pair(segment, size, 0, 1, "local rank 1");
    commit_pair(segment, size, 1, 0, "local rank 0");
  }
}

void ShmChannel::commit_pair(const SharedSegment& segment, int size, int from, int to,
                             const std::string& whom) {
  segment.commit(segment.data() + ring_offset(from, to, size), kRingCounterBytes,
                 "the ring to " + whom);
  segment.commit(segment.data() + answers_offset(from, to, size), Answers::kBytes,
                 "the answers of " + whom);
  segment.commit(segment.data() + ring_offset(to, from, size), kRingCounterBytes,
                 "the ring from " + whom);
}

size_t ShmChannel::polled_bytes(int size) {
  return static_cast<size_t>(size) * senders_stride(size);
}

size_t ShmChannel::ring_offset(int from, int to, int size) {
  return kControlBytes +
         (static_cast<size_t>(from) * static_cast<size_t>(size) + static_cast<size_t>(to)) *
             Ring::kBytes;
}

ShmChannel::ShmChannel(int rank, int size, SharedSegment segment, ShmOptions options)
    : rank_(rank),
      size_(size),
      segment_(std::move(segment)),
      options_(options),
      slots_(segment_.data() + slots_offset(size), size, pids(), &segment_) {
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
  auto ring = [&](int from, int to) { return Ring(segment_.data() + ring_offset(from, to, size)); };
  for (int peer = 0; peer < size; ++peer) {
    peers_.emplace_back(ring(rank, peer), ring(peer, rank),
                        Answers(segment_.data() + answers_offset(rank, peer, size)),
                        Answers(segment_.data() + answers_offset(peer, rank, size)));
  }
  seen_senders_.assign(sender_words(size), 0);
  pids()[rank] = getpid();
}

std::atomic_ref<uint64_t> ShmChannel::roomless_word(int rank) const {
  auto* bitmap = reinterpret_cast<uint64_t*>(segment_.data() + roomless_offset(size_));
  return std::atomic_ref<uint64_t>(bitmap[static_cast<size_t>(rank) / 64]);
}

std::atomic_ref<uint64_t> ShmChannel::sender_word(int receiver, int sender) const {
  std::byte* bitmap = segment_.data() + senders_offset(size_) +
                      static_cast<size_t>(receiver) * senders_stride(size_);
  return std::atomic_ref<uint64_t>(
      reinterpret_cast<uint64_t*>(bitmap)[static_cast<size_t>(sender) / 64]);
}

void ShmChannel::poll_peer(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.polled || peer == rank_) return;
  p.polled = true;
  polled_.push_back(peer);
}

// New bits in our bitmap: ranks that have begun to send to us.
void ShmChannel::find_new_senders() {
  for (size_t word = 0; word < seen_senders_.size(); ++word) {
    const uint64_t now =
        sender_word(rank_, static_cast<int>(word * 64)).load(std::memory_order_acquire);
    uint64_t fresh = now & ~seen_senders_[word];
    if (fresh == 0) continue;
    seen_senders_[word] = now;
    for (; fresh != 0; fresh &= fresh - 1)
      poll_peer(static_cast<int>(word * 64) + std::countr_zero(fresh));
  }
}

void ShmChannel::post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                           Completion done) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return completions_.add(std::move(done), p.failure, 0);
  const bool single_copy = p.single_copy && options_.single_copy.holds(length);
  p.outgoing.push_back({single_copy ? Kind::rendezvous : Kind::first, tag, 0,
                        static_cast<const std::byte*>(buffer), length, 0, std::move(done)});
  fill(peer);
}

void ShmChannel::post_recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  PostedRecv posted{static_cast<std::byte*>(buffer), capacity, std::move(done), tag};
  if (auto arrival = matches_.take_unexpected({peer, tag})) {
    Unexpected& u = **arrival;
    if (u.aborted) return completions_.add(std::move(posted.done), withdrawn(peer), 0);
    // From a peer failed since it came, only a message already whole here can still be taken:
    // nobody would bring the rest, nor copy an offer out of a process that is gone.
    if (p.failed && (u.remote || u.received < u.total))
      return completions_.add(std::move(posted.done), p.failure, 0);
    if (u.remote) return read_remote(peer, *u.remote, std::move(posted));
    if (u.received == u.total) {
      if (const size_t n = std::min(capacity, u.total)) {
        std::memcpy(posted.buffer, u.bytes.data(), n);
      }
      return finish(peer, posted, u.total);
    }
    u.waiter.emplace(std::move(posted));  // still arriving
    return;
  }
  if (p.failed) return completions_.add(std::move(posted.done), p.failure, 0);
  matches_.add_posted({peer, tag}, std::move(posted));
  ++p.waiting;
}

void ShmChannel::cancel(uint64_t first, uint64_t last) {
  const auto in_range = [&](uint64_t tag) { return tag >= first && tag <= last; };
  const auto drop = [](PostedRecv& r) { r = PostedRecv{nullptr, 0, {}, r.tag}; };
  matches_.remove_posted(first, last,
                         [this](int peer) { --peers_[static_cast<size_t>(peer)].waiting; });
  // What came early for them will never be taken, nor what still comes: dropped, and a
  // rendezvous declined, so that its sender stops waiting.
  withdrawn_tags_.add(first, last);
  matches_.remove_unexpected(first, last, [this](int peer, uint64_t, Arrival& a) {
    if (a->remote) peers_[static_cast<size_t>(peer)].answers_to_peer.decline(a->remote->id);
  });
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (peer == rank_ || p.failed) continue;  // a failed peer's operations have ended
    withdraw_sends(peer, first, last);
    // Receives under way: whatever still comes for them is dropped.
    Incoming& in = p.incoming;
    if (in.active && !in.unexpected && in_range(in.posted.tag)) drop(in.posted);
    if (in.active && in.unexpected && in.unexpected->waiter &&
        in_range(in.unexpected->waiter->tag)) {
      in.unexpected->waiter.reset();
    }
    for (auto& [id, posted] : p.awaiting_copy) {
      if (in_range(posted.tag)) drop(posted);
    }
  }
}

// Sends not begun are forgotten. One begun in the ring, or a refused rendezvous the receiver
// waits to get through the ring, leaves an `aborted` fragment in its place. A rendezvous is
// withdrawn in its Answers entry; if the receiver claimed it first, its read is waited for
// (one process_vm_readv, unless the receiver has died meanwhile).
void ShmChannel::withdraw_sends(int peer, uint64_t first, uint64_t last) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  const auto in_range = [&](uint64_t tag) { return tag >= first && tag <= last; };
  const auto aborted = [](uint64_t tag, uint64_t id) {
    return SendOp{Kind::aborted, tag, id, nullptr, 0, 0, {}};
  };
  Fifo<SendOp> kept;
  for (SendOp& op : p.outgoing) {
    if (!in_range(op.tag)) {
      kept.push_back(std::move(op));
    } else if (op.sent > 0 || op.kind == Kind::fallback) {
      kept.push_back(aborted(op.tag, op.kind == Kind::fallback ? op.id : op.tag));
    }
  }
  p.outgoing = std::move(kept);
  const Deadline patience(options_.read_wait);  // for all the reads under way, not each
  for (auto it = p.awaiting_answer.begin(); it != p.awaiting_answer.end();) {
    if (!in_range(it->second.tag)) {
      ++it;
      continue;
    }
    // Claimed: the receiver is reading the caller's buffer (one process_vm_readv) and answers
    // after it. One that stops midway (a debugger, SIGSTOP) or dies (its pid may name another
    // process by now) is waited for as long as a call would be, then abandoned.
    Answers::Answer answer = p.answers.withdraw(it->first);
    while (answer == Answers::reading) {
      if (patience.expired() || !process_alive(pids()[peer])) {
        answer = p.answers.abandon(it->first);
        break;
      }
      sched_yield();
      answer = p.answers.answer_to(it->first);
    }
    if (answer == Answers::refused) p.outgoing.push_back(aborted(it->second.tag, it->first));
    it = p.awaiting_answer.erase(it);
  }
  fill(peer);
}

Status ShmChannel::withdrawn(int peer) const {
  return Status(Code::peer_failed, who(peer) +
                                       " withdrew a message before it was delivered (its call "
                                       "ended)");
}

// Only the peers this rank sends to or hears from: an idle poll reads its bitmap (a word per 64
// local ranks) and the rings in use, not a ring per local rank.
int ShmChannel::poll() {
  int events = 0;
  find_new_senders();
  for (size_t i = 0; i < polled_.size(); ++i) {  // by index: a completion may add a peer
    const int peer = polled_[i];
    if (peers_[static_cast<size_t>(peer)].failed) continue;
    events += drain(peer);
    events += collect_answers(peer);
    events += fill(peer);
  }
  if (++polls_since_check_ >= kPollsPerClockRead) {
    polls_since_check_ = 0;
    check_liveness();
  }
  if (!words_heard_.empty()) {
    find_the_dead();
    for (const auto& [teller, notice] : words_heard_)
      observer_->heard(*this, teller, notice);
    words_heard_.clear();
  }
  return events + completions_.run();
}

int ShmChannel::drain(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  int fragments = 0;
  while (const std::byte* slot = p.from.slot_to_read()) {
    if (p.failed) break;  // a peer that sent garbage: nothing more of it is read
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
  if (!p.outgoing.empty() && !p.announced) {
    // Before the first fragment: the counters of the rings both ways (ours, and the one our
    // polls of the peer read) and the table of answers get their pages, and the peer starts
    // polling our ring once it sees our bit.
    try {
      commit_pair(segment_, size_, rank_, peer, who(peer));
    } catch (const Error& e) {
      leave_for_want_of_room(e.status());
      return 0;
    }
    p.announced = true;
    sender_word(peer, rank_).fetch_or(uint64_t{1} << (rank_ % 64), std::memory_order_release);
    poll_peer(peer);  // for its answers, and the rest of what we queue
  }
  int fragments = 0;
  while (!p.outgoing.empty()) {
    std::byte* slot = p.to.slot_to_fill();
    if (!slot) break;
    // A slot gets its pages at its first use: a ring that carries only small notices holds a
    // page or two, as when it was only touched.
    if (const uint32_t bit = 1u << p.to.index_of(slot); !(p.committed_slots & bit)) {
      try {
        segment_.commit(slot, Ring::kSlotBytes, "the ring to " + who(peer));
      } catch (const Error& e) {
        leave_for_want_of_room(e.status());
        return fragments;
      }
      p.committed_slots |= bit;
    }
    if (!publish(p, slot, p.outgoing.front())) break;
    ++fragments;
  }
  return fragments;
}

void ShmChannel::tell(int peer, const Notice& notice) {
  check_peer(peer, "tell");
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return;
  p.outgoing.push_back({Kind::notice, 0, notice.subject, nullptr, notice.packed(), 0, {}});
  fill(peer);
}

bool ShmChannel::notices_pending() const {
  for (const Peer& p : peers_) {
    if (p.failed) continue;
    for (const SendOp& op : p.outgoing)
      if (op.kind == Kind::notice) return true;
  }
  return false;
}

void ShmChannel::tell_peers(const Notice& notice) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer != rank_) tell(peer, notice);
  }
}

// Writes the next fragment of `op` (the front of p.outgoing) into `slot`; pops the op once it
// has nothing more to say.
bool ShmChannel::publish(Peer& p, std::byte* slot, SendOp& op) {
  const bool by_id =
      op.kind == Kind::fallback || op.kind == Kind::aborted || op.kind == Kind::notice;
  FragmentHeader header{by_id ? op.id : op.tag, op.length, 0, op.sent == 0 ? op.kind : Kind::more};
  switch (header.kind) {
    case Kind::rendezvous: {
      const uint64_t id = p.next_rendezvous;
      if (id >= Answers::kEntries && p.awaiting_answer.count(id - Answers::kEntries)) {
        return false;  // its entry still waits for an answer
      }
      ++p.next_rendezvous;
      op.id = id;
      p.answers.open(id);
      const RemoteMessage remote{id, reinterpret_cast<uint64_t>(op.data), op.length};
      header.bytes = sizeof(remote);
      std::memcpy(slot + sizeof(header), &remote, sizeof(remote));
      std::memcpy(slot, &header, sizeof(header));
      p.to.publish();
      p.awaiting_answer.emplace(id, std::move(op));
      break;
    }
    case Kind::aborted:
    case Kind::notice:  // kind and detail travel as `total`
      std::memcpy(slot, &header, sizeof(header));
      p.to.publish();
      break;
    case Kind::first:
    case Kind::fallback:
    case Kind::more: {
      const size_t bytes = std::min(kFragmentPayload, op.length - op.sent);
      header.bytes = static_cast<uint32_t>(bytes);
      std::memcpy(slot, &header, sizeof(header));
      if (bytes) std::memcpy(slot + sizeof(header), op.data + op.sent, bytes);
      p.to.publish();
      op.sent += bytes;
      if (op.sent < op.length) return true;
      completions_.add(std::move(op.done), Status(), op.length);
      break;
    }
  }
  p.outgoing.pop_front();
  return true;
}

int ShmChannel::collect_answers(int peer) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  int answered = 0;
  for (auto it = p.awaiting_answer.begin(); it != p.awaiting_answer.end();) {
    const Answers::Answer answer = p.answers.answer_to(it->first);
    if (answer == Answers::pending || answer == Answers::reading) {
      ++it;
      continue;
    }
    SendOp op = std::move(it->second);
    if (answer == Answers::done) {
      completions_.add(std::move(op.done), Status(), op.length);
    } else if (answer == Answers::withdrawn) {  // declined: its receive was withdrawn
      completions_.add(std::move(op.done), withdrawn(peer), 0);
    } else {
      p.single_copy = false;  // it cannot read us: copy this and later messages through
      p.outgoing.push_back(
          {Kind::fallback, op.tag, it->first, op.data, op.length, 0, std::move(op.done)});
    }
    it = p.awaiting_answer.erase(it);
    ++answered;
  }
  return answered;
}

void ShmChannel::on_fragment(int peer, const FragmentHeader& header, const std::byte* payload) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  const Incoming& in = p.incoming;
  if (const std::string error =
          fragment_error(header, in.active, in.received, in.total, max_message_size());
      !error.empty()) {
    return fail_peer(peer,
                     Status(Code::peer_failed, who(peer) + " sent " + error + " (pid " +
                                                   std::to_string(pids()[peer]) + "): malformed"));
  }
  switch (header.kind) {
    case Kind::rendezvous: {
      RemoteMessage remote;
      std::memcpy(&remote, payload, sizeof(remote));
      if (auto posted = matches_.take_posted({peer, header.tag})) {
        --p.waiting;
        read_remote(peer, remote, std::move(*posted));
      } else if (withdrawn_tags_.contains(header.tag)) {
        p.answers_to_peer.decline(remote.id);
      } else {
        auto arrival = new_arrival();
        arrival->remote = remote;
        matches_.add_unexpected({peer, header.tag}, std::move(arrival));
      }
      return;
    }
    case Kind::first:
    case Kind::fallback:
    case Kind::more:
      return on_data(peer, header, payload);
    case Kind::aborted:
      return on_aborted(peer, header.tag);
    case Kind::notice:
      if (const std::optional<Notice> notice = Notice::unpacked(header.tag, header.total);
          notice && observer_) {
        // A death told by another waits for the end of this poll, which first looks at the
        // local peers itself: a neighbour's own reason (it left for want of room, it exited)
        // is what this rank's calls should say, not the teller's word.
        if (notice->kind == Notice::Kind::rank_gone) return words_heard_.push_back({peer, *notice});
        observer_->heard(*this, peer, *notice);
      }
      return;
  }
}

void ShmChannel::on_aborted(int peer, uint64_t id) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  Incoming& in = p.incoming;
  const Status why = withdrawn(peer);
  if (!in.active) {  // a refused rendezvous whose copy will not come
    if (auto waiting = p.awaiting_copy.extract(id); !waiting.empty()) {
      completions_.add(std::move(waiting.mapped().done), why, 0);
    }
    return;
  }
  if (!in.unexpected) {
    completions_.add(std::move(in.posted.done), why, 0);
  } else {
    in.unexpected->aborted = true;  // a receive that takes it later fails
    if (in.unexpected->waiter) completions_.add(std::move(in.unexpected->waiter->done), why, 0);
    in.unexpected->waiter.reset();
  }
  in = Incoming{};
}

void ShmChannel::read_remote(int peer, const RemoteMessage& remote, PostedRecv posted) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (!p.answers_to_peer.claim(remote.id)) {  // the sender withdrew it
    return completions_.add(std::move(posted.done), withdrawn(peer), 0);
  }
  const size_t bytes = std::min<size_t>(posted.capacity, remote.length);
  const int error = read_process_memory(pids()[peer], remote.address, posted.buffer, bytes);
  if (error == 0) {
    if (!p.answers_to_peer.answer(remote.id, Answers::done)) {  // abandoned while we read
      return completions_.add(std::move(posted.done), withdrawn(peer), 0);
    }
    finish(peer, posted, remote.length);
  } else {
    // ESRCH (it died) lands here too, and the liveness check fails the receive.
    if (!std::exchange(p.refused_single_copy, true))
      IBCOLL_LOG(info, "single copy from peer " << peer << " refused (" << std::strerror(error)
                                                << "): it copies through the ring instead");
    if (!p.answers_to_peer.answer(remote.id, Answers::refused)) {  // abandoned: none will come
      return completions_.add(std::move(posted.done), withdrawn(peer), 0);
    }
    p.awaiting_copy.emplace(remote.id, std::move(posted));
  }
}

void ShmChannel::on_data(int peer, const FragmentHeader& header, const std::byte* payload) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  Incoming& in = p.incoming;
  if (header.kind == Kind::first) {
    in = Incoming{true, header.total, 0, {}, nullptr};
    if (auto posted = matches_.take_posted({peer, header.tag})) {
      --p.waiting;
      in.posted = std::move(*posted);
    } else if (withdrawn_tags_.contains(header.tag)) {
      in.posted = PostedRecv{nullptr, 0, {}, header.tag};  // its fragments are dropped
    } else {
      in.unexpected = new_arrival();
      try {
        in.unexpected->bytes = PooledBytes(early_arrivals_, header.total);
      } catch (const std::bad_alloc&) {
        in = Incoming{};
        return fail_peer(
            peer, Status(Code::system_error, who(peer) + " sent a message of " +
                                                 std::to_string(header.total) +
                                                 " bytes with no receive posted, and there is no "
                                                 "memory to hold it"));
      }
      in.unexpected->total = header.total;
      matches_.add_unexpected({peer, header.tag}, in.unexpected);
    }
  } else if (header.kind == Kind::fallback) {
    auto waiting = p.awaiting_copy.extract(header.tag);
    if (waiting.empty()) {
      return fail_peer(peer,
                       Status(Code::peer_failed, who(peer) + " copied an unknown rendezvous"));
    }
    in = Incoming{true, header.total, 0, std::move(waiting.mapped()), nullptr};
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
  next_check_ = now + options_.liveness_interval;
  // While anything is pending, every peer is checked: what we wait for may hang on another
  // peer's death (a collective waits on a partner that waits on the dead one).
  const bool busy = std::any_of(peers_.begin(), peers_.end(), [](const Peer& p) {
    return p.waiting > 0 || !p.outgoing.empty() || p.incoming.active ||
           !p.awaiting_answer.empty() || !p.awaiting_copy.empty();
  });
  if (busy) find_the_dead();
}

void ShmChannel::find_the_dead() {
  for (int peer = 0; peer < size_; ++peer) {
    Peer& p = peers_[static_cast<size_t>(peer)];
    if (peer == rank_ || p.failed) continue;
    std::string gone;
    const pid_t pid = pids()[peer];
    const bool exited = pid > 0 && !process_alive(pid);
    if (roomless_word(peer).load(std::memory_order_acquire) & (uint64_t{1} << (peer % 64))) {
      gone =
          " found no room in the node's shared memory (/dev/shm) and left it (its log names "
          "the part)";
    } else if (exited) {
      gone = " (pid " + std::to_string(pid) + ") has exited";
    } else {
      continue;
    }
    // What it sent before is still good; a ring it never announced may have no pages to read.
    if (p.polled) drain(peer);
    fail_peer(peer, Status(Code::peer_failed, who(peer) + gone), true);
    if (exited) give_back_pair(peer);
  }
}

void ShmChannel::give_back_pair(int peer) {
  segment_.give_back(segment_.data() + ring_offset(peer, rank_, size_), Ring::kBytes);
  segment_.give_back(segment_.data() + ring_offset(rank_, peer, size_), Ring::kBytes);
}

// A part this rank needs found no room: its peers could wait on it for ever (a ring it cannot
// fill, a ring to it nobody polls), so it leaves for all of them, and says so in the segment;
// their liveness checks fail it, as if it had exited, and spread the word off the node.
void ShmChannel::leave_for_want_of_room(const Status& why) {
  IBCOLL_LOG(warn, "this rank leaves the node's shared memory: " << why.message());
  roomless_word(rank_).fetch_or(uint64_t{1} << (rank_ % 64), std::memory_order_release);
  for (int peer = 0; peer < size_; ++peer)
    if (peer != rank_) drop_peer(peer, why);
}

bool ShmChannel::a_rank_left() const {
  for (int word = 0; word * 64 < size_; ++word)
    if (roomless_word(word * 64).load(std::memory_order_acquire) != 0) return true;
  return false;
}

void ShmChannel::fail_peer(int peer, const Status& status, bool gone) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return;
  if (gone && observer_) observer_->peer_gone(*this, peer, status);
  IBCOLL_LOG(warn, who(peer) << " failed: " << status.message());
  drop_peer(peer, status);
}

void ShmChannel::drop_peer(int peer, const Status& status) {
  Peer& p = peers_[static_cast<size_t>(peer)];
  if (p.failed) return;
  p.failed = true;
  p.failure = status;
  for (SendOp& op : p.outgoing)
    completions_.add(std::move(op.done), status, 0);
  p.outgoing.clear();
  for (auto& [id, op] : p.awaiting_answer)
    completions_.add(std::move(op.done), status, 0);
  p.awaiting_answer.clear();
  for (auto& [id, recv] : p.awaiting_copy)
    completions_.add(std::move(recv.done), status, 0);
  p.awaiting_copy.clear();
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

void ShmChannel::name_peers(std::vector<int> job_ranks) {
  job_ranks_ = std::move(job_ranks);
}

std::string ShmChannel::who(int peer) const {
  return job_ranks_.empty() ? "peer " + std::to_string(peer)
                            : "rank " + std::to_string(job_ranks_[static_cast<size_t>(peer)]);
}

}  // namespace ibcoll::transport::shm
