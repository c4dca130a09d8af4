// MatchTable: pairs posted receives with arriving messages by (peer, tag), first come first
// served within each key, which keeps a sender's messages in order. Arrivals with no receive
// posted yet wait in the unexpected queue; receives with no arrival yet wait in the posted one.
// Queues are per peer and searched in order: the match is almost always at the front, and the
// hot path allocates nothing once a peer's queues have grown to their working size.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>

#include "base/fifo.h"
#include "transport/peer_map.h"

namespace ibcoll::transport {

template <typename Posted, typename Arrival>
class MatchTable {
 public:
  struct Key {
    int peer;
    uint64_t tag;
  };

  // An arrival takes the oldest receive posted for its key, if any; else it waits.
  std::optional<Posted> take_posted(Key key) { return take(queues(key.peer).posted, key.tag); }
  void add_unexpected(Key key, Arrival arrival) {
    queues(key.peer).unexpected.push_back({key.tag, std::move(arrival)});
  }

  // A new receive takes the oldest unexpected arrival for its key, if any; else it waits.
  std::optional<Arrival> take_unexpected(Key key) {
    return take(queues(key.peer).unexpected, key.tag);
  }
  void add_posted(Key key, Posted posted) {
    queues(key.peer).posted.push_back({key.tag, std::move(posted)});
  }

  // Removes every posted receive from `peer`, handing each to `fail`.
  void fail_peer(int peer, const std::function<void(Posted&)>& fail) {
    auto waiting = std::move(queues(peer).posted);
    queues(peer).posted.clear();
    for (auto& entry : waiting)
      fail(entry.value);
  }
  // Removes the posted receives whose tag lies in [first, last], calling `removed(peer)` for
  // each.
  void remove_posted(uint64_t first, uint64_t last, const std::function<void(int)>& removed) {
    remove_in_range(&PeerQueues::posted, first, last,
                    [&](int peer, uint64_t, Posted&) { removed(peer); });
  }
  // Removes the arrivals waiting whose tag lies in [first, last], handing each to
  // `removed(peer, tag, arrival)`.
  template <typename Removed>
  void remove_unexpected(uint64_t first, uint64_t last, Removed removed) {
    remove_in_range(&PeerQueues::unexpected, first, last, removed);
  }
  // Calls `visit(tag, arrival)` for every arrival from `peer` waiting in order.
  template <typename Visit>
  void for_each_unexpected(int peer, Visit visit) {
    for (auto& entry : queues(peer).unexpected)
      visit(entry.tag, entry.value);
  }
  size_t posted_count(int peer) { return queues(peer).posted.size(); }
  size_t unexpected_count() const {
    size_t n = 0;
    peers_.for_each([&](int, const PeerQueues& q) { n += q.unexpected.size(); });
    return n;
  }

 private:
  template <typename T>
  struct Entry {
    uint64_t tag;
    T value;
  };
  struct PeerQueues {
    Fifo<Entry<Posted>> posted;
    Fifo<Entry<Arrival>> unexpected;
  };

  PeerQueues& queues(int peer) { return peers_[peer]; }
  template <typename Queue, typename Removed>
  void remove_in_range(Queue PeerQueues::*queue, uint64_t first, uint64_t last, Removed removed) {
    peers_.for_each([&](int peer, PeerQueues& queues) {
      auto& entries = queues.*queue;
      for (auto it = entries.begin(); it != entries.end();) {
        if (it->tag < first || it->tag > last) {
          ++it;
          continue;
        }
        removed(peer, it->tag, it->value);
        it = entries.erase(it);
      }
    });
  }
  template <typename T>
  static std::optional<T> take(Fifo<Entry<T>>& queue, uint64_t tag) {
    for (auto it = queue.begin(); it != queue.end(); ++it) {
      if (it->tag != tag) continue;
      std::optional<T> found(std::move(it->value));
      queue.erase(it);
      return found;
    }
    return std::nullopt;
  }

  PeerMap<PeerQueues> peers_;  // the peers that sent or were posted for, not every rank
};

}  // namespace ibcoll::transport
