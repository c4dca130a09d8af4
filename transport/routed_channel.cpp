#include "transport/routed_channel.h"

#include <algorithm>
#include <limits>
#include <string>

namespace ibcoll::transport {

RoutedChannel::RoutedChannel(int rank, std::vector<Route> routes, std::vector<Channel*> channels)
    : rank_(rank),
      routes_(std::move(routes)),
      channels_(std::move(channels)),
      sent_(channels_.size()) {
  max_message_size_ = std::numeric_limits<size_t>::max();
  for (const Channel* c : channels_)
    max_message_size_ = std::min(max_message_size_, c->max_message_size());
  for (size_t r = 0; r < routes_.size(); ++r) {
    if (static_cast<int>(r) != rank_ && !routes_[r].channel) {
      throw Error(Code::internal, "no transport reaches rank " + std::to_string(r));
    }
    const auto c = std::find(channels_.begin(), channels_.end(), routes_[r].channel);
    routes_[r].transport = static_cast<uint8_t>(c == channels_.end() ? 0 : c - channels_.begin());
  }
  for (Channel* c : channels_)
    c->observe(this);
}

int RoutedChannel::job_rank_of(const Channel& from, int peer) const {
  for (size_t r = 0; r < routes_.size(); ++r) {
    if (routes_[r].channel == &from && routes_[r].peer == peer) return static_cast<int>(r);
  }
  return -1;
}

void RoutedChannel::peer_gone(const Channel& from, int peer, const Status& why) {
  const int rank = job_rank_of(from, peer);
  if (rank >= 0) note_gone(rank, why);
}

void RoutedChannel::heard(const Channel& from, int teller, const Notice& notice) {
  // A teller this rank holds gone may be one wrongly taken for dead (a probe unanswered on a
  // lossy link): its word would spread the mistake, and it has nothing to add. One that still
  // takes part in an agreement has not heard it: it is told.
  const int told_by = job_rank_of(from, teller);
  if (told_by < 0) return;
  if (gone_.contains(told_by)) {
    if (notice.kind == Notice::Kind::agreeing) tell_fenced(told_by);
    return;
  }
  if (notice.kind != Notice::Kind::rank_gone) {
    if (listener_) to_hand_on_.emplace_back(told_by, notice);
    return;
  }
  const uint64_t job_rank = notice.subject;
  if (job_rank >= routes_.size()) return;
  if (static_cast<int>(job_rank) == rank_) {
    if (!fenced_) {
      fenced_ =
          Status(Code::fenced, "this rank (" + std::to_string(rank_) +
                                   ") was declared failed by rank " + std::to_string(told_by) +
                                   ": the job goes on without it (it was silent too long "
                                   "where others waited on it, or cut off); it may only "
                                   "finalize");
    }
    return;
  }
  const auto code = static_cast<Code>(notice.detail);
  note_gone(static_cast<int>(job_rank),
            Status(code, "rank " + std::to_string(job_rank) + " is gone (rank " +
                             std::to_string(told_by) + " saw it fail)"));
}

void RoutedChannel::note_gone(int rank, Status why) {
  if (!gone_.emplace(rank, std::move(why)).second) return;  // heard already: told already
  to_tell_.emplace_back(static_cast<uint32_t>(rank), gone_.at(rank).code());
}

void RoutedChannel::hold_failed(int peer, const Status& why) {
  check_peer(peer, "hold_failed");
  note_gone(peer, why);
}

void RoutedChannel::fence(int peer, const Status& why) {
  check_peer(peer, "fence");
  tell_fenced(peer);  // before it is held gone: a transport tells a failed peer nothing
  note_gone(peer, why);
}

void RoutedChannel::tell_fenced(int rank) {
  fenced_peers_.insert(rank);
  const Route& route = routes_[static_cast<size_t>(rank)];
  route.channel->tell(route.peer, {Notice::Kind::rank_gone, static_cast<uint64_t>(rank),
                                   static_cast<uint32_t>(Code::fenced)});
}

void RoutedChannel::tell(int peer, const Notice& notice) {
  check_peer(peer, "tell");
  const Route& route = routes_[static_cast<size_t>(peer)];
  route.channel->tell(route.peer, notice);
}

bool RoutedChannel::notices_pending() const {
  return std::any_of(channels_.begin(), channels_.end(),
                     [](const Channel* c) { return c->notices_pending(); });
}

void RoutedChannel::tell_peers(const Notice& notice) {
  for (Channel* c : channels_)
    c->tell_peers(notice);
}

void RoutedChannel::post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                              Completion done) {
  const Route& route = routes_[static_cast<size_t>(peer)];
  Traffic& sent = sent_[route.transport];
  ++sent.messages;
  sent.bytes += length;
  forward_send(*route.channel, route.peer, tag, buffer, length, std::move(done));
}

RoutedChannel::Traffic RoutedChannel::sent_through(const Channel& channel) const {
  const auto c = std::find(channels_.begin(), channels_.end(), &channel);
  return c == channels_.end() ? Traffic{} : sent_[static_cast<size_t>(c - channels_.begin())];
}

void RoutedChannel::post_recv(int peer, uint64_t tag, void* buffer, size_t capacity,
                              Completion done) {
  const Route& route = routes_[static_cast<size_t>(peer)];
  forward_recv(*route.channel, route.peer, tag, buffer, capacity, std::move(done));
}

void RoutedChannel::cancel(uint64_t first, uint64_t last) {
  for (Channel* c : channels_)
    c->cancel(first, last);
}

int RoutedChannel::poll() {
  int events = 0;
  for (Channel* c : channels_)
    events += c->poll();
  while (!to_tell_.empty()) {
    const auto [rank, code] = to_tell_.back();
    to_tell_.pop_back();
    // A fenced rank lives: its transport keeps it, so that what it was told reaches it.
    if (const Route& route = routes_[rank]; route.channel && !fenced_peers_.contains(rank))
      route.channel->peer_gone_elsewhere(route.peer, gone_.at(static_cast<int>(rank)));
    tell_peers({Notice::Kind::rank_gone, rank, static_cast<uint32_t>(code)});
  }
  if (!to_hand_on_.empty()) {  // the listener may tell others: not from inside a transport
    std::vector<std::pair<int, Notice>> heard;
    heard.swap(to_hand_on_);
    for (const auto& [teller, notice] : heard)
      listener_->heard(teller, notice);
  }
  return events;
}

// Sleeping needs every transport's descriptor; with several, keep polling instead.
int RoutedChannel::arm_event_fd() {
  return channels_.size() == 1 ? channels_.front()->arm_event_fd() : -1;
}

}  // namespace ibcoll::transport
