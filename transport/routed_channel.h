// RoutedChannel: one Channel over every rank of the job that hands each peer to the transport
// reaching it: shared memory inside a node, verbs between nodes (or one of them for all, when
// forced). Collectives see a single channel and never learn which transport carried a message.
#pragma once

#include <vector>

#include "transport/channel.h"

namespace ibcoll::transport {

class RoutedChannel final : public Channel {
 public:
  // How to reach one peer: through `channel`, where it is rank `peer`.
  struct Route {
    Channel* channel = nullptr;  // null for this process itself
    int peer = -1;
  };

  // `routes` has one entry per rank of the job; `channels` are the distinct transports, which
  // must outlive this object.
  RoutedChannel(int rank, std::vector<Route> routes, std::vector<Channel*> channels);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(routes_.size()); }
  size_t max_message_size() const override { return max_message_size_; }
  void send(int peer, uint64_t tag, const void* buffer, size_t length, Completion done) override;
  void recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) override;
  void cancel(uint64_t first, uint64_t last) override;
  const Status* peer_failure(int peer) const override {
    const Route& route = routes_[static_cast<size_t>(peer)];
    return route.channel ? route.channel->peer_failure(route.peer) : nullptr;
  }
  int poll() override;
  int arm_event_fd() override;

  // The transport that reaches `peer` (for reports: "shm" or "verbs" by the caller's naming).
  const Channel* channel_of(int peer) const { return routes_[static_cast<size_t>(peer)].channel; }

 private:
  int rank_;
  std::vector<Route> routes_;
  std::vector<Channel*> channels_;
  size_t max_message_size_ = 0;
};

}  // namespace ibcoll::transport
