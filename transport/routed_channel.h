// RoutedChannel: one Channel over every rank of the job that hands each peer to the transport
// reaching it: shared memory inside a node, verbs between nodes (or one of them for all, when
// forced). Collectives see a single channel and never learn which transport carried a message.
//
// It also spreads the news of a rank that is gone: when a transport sees a peer die (its
// process exits; its node stops answering keepalives or the transport's retries), or a peer
// says some rank is gone, the rank is noted gone here (peer_failure() answers for it, so every
// call with it among its members fails) and, the first time, every peer that any transport
// reaches now hears it too. The word floods the graph of connections once per gone rank, so a
// rank that waits on a live partner that waits on the dead one learns it in seconds, not at its
// deadline. Other notices (a communicator revoked) go to its listener, from poll(); a notice
// from a rank held gone is dropped: its word is not heeded, whatever it says.
//
// A rank may be held gone that lives (an agreement gave up on it, fence()): it is told so, and a
// rank that hears that it is held gone is fenced out: from then on every peer is failed for it
// with Code::fenced, so that its calls fail and it can only finalize. One held gone that still
// says it is agreeing is told again (it may not have heard).
#pragma once

#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "transport/channel.h"

namespace ibcoll::transport {

class RoutedChannel final : public Channel, private Channel::Observer {
 public:
  // How to reach one peer: through `channel`, where it is rank `peer`.
  struct Route {
    Channel* channel = nullptr;  // null for this process itself
    int peer = -1;
    uint8_t transport = 0;  // set here: the index of `channel` in the channels
  };
  struct Traffic {
    uint64_t messages = 0, bytes = 0;
  };

  // `routes` has one entry per rank of the job; `channels` are the distinct transports, which
  // must outlive this object.
  RoutedChannel(int rank, std::vector<Route> routes, std::vector<Channel*> channels);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(routes_.size()); }
  size_t max_message_size() const override { return max_message_size_; }
  void cancel(uint64_t first, uint64_t last) override;
  bool unaided(int peer, size_t bytes) const override {
    const Route& route = routes_[static_cast<size_t>(peer)];
    return route.channel && route.channel->unaided(route.peer, bytes);
  }
  const Status* peer_failure(int peer) const override {
    if (const Status* out = fenced()) return out;
    if (auto it = gone_.find(peer); it != gone_.end()) return &it->second;
    const Route& route = routes_[static_cast<size_t>(peer)];
    return route.channel ? route.channel->peer_failure(route.peer) : nullptr;
  }
  size_t failures_known() const override { return gone_.size() + (fenced_ ? 1 : 0); }
  void hold_failed(int peer, const Status& why) override;
  void fence(int peer, const Status& why) override;
  void tell(int peer, const Notice& notice) override;
  void tell_peers(const Notice& notice) override;
  bool notices_pending() const override;
  // Who hears the notices that are not news of a gone rank (the context: revoked communicators).
  class Listener {
   public:
    virtual ~Listener() = default;
    virtual void heard(int teller, const Notice& notice) = 0;  // `teller`: its job rank
  };
  void listen(Listener* listener) { listener_ = listener; }
  int poll() override;
  int arm_event_fd() override;

  // Why this rank was fenced out (another held it failed and told it), or null.
  const Status* fenced() const { return fenced_ ? &*fenced_ : nullptr; }
  // Whether some rank of the job is known gone (or this one fenced out).
  bool any_rank_gone() const { return !gone_.empty() || fenced_; }
  // The transport that reaches `peer` (for reports: "shm" or "verbs" by the caller's naming).
  const Channel* channel_of(int peer) const { return routes_[static_cast<size_t>(peer)].channel; }
  // What was sent through `channel` (one of the transports) since the start.
  Traffic sent_through(const Channel& channel) const;

 private:
  void post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                 Completion done) override;
  void post_recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) override;
  // Channel::Observer
  void peer_gone(const Channel& from, int peer, const Status& why) override;
  void heard(const Channel& from, int teller, const Notice& notice) override;
  // The job rank that is `peer` of channel `from`.
  int job_rank_of(const Channel& from, int peer) const;
  void note_gone(int rank, Status why);
  // Tells `rank` that it is held gone.
  void tell_fenced(int rank);

  int rank_;
  std::vector<Route> routes_;
  std::vector<Channel*> channels_;
  std::vector<Traffic> sent_;  // per transport
  size_t max_message_size_ = 0;
  std::unordered_map<int, Status> gone_;            // ranks known gone, and why
  std::unordered_set<int> fenced_peers_;            // those of them this rank told so
  std::optional<Status> fenced_;                    // this rank was fenced out, by whom
  std::vector<std::pair<uint32_t, Code>> to_tell_;  // told from poll(), outside the transports
  Listener* listener_ = nullptr;
  std::vector<std::pair<int, Notice>> to_hand_on_;  // the listener's, handed on from poll()
};

}  // namespace ibcoll::transport
