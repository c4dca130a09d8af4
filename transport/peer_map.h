// PeerMap: per-peer state for the peers a process has dealt with, by job rank. A process of a
// 65 536-rank job talks to a few dozen peers: state indexed by rank would cost megabytes per
// process and a walk of every rank on each timer tick. Entries are made on first use and never
// removed (a failed peer stays failed), so references stay valid; the peer used last is
// remembered, since a message path looks the same peer up several times in a row.
#pragma once

#include <unordered_map>

namespace ibcoll::transport {

template <typename T>
class PeerMap {
 public:
  PeerMap() = default;
  PeerMap(const PeerMap&) = delete;  // the remembered entry would point into the other map
  PeerMap& operator=(const PeerMap&) = delete;

  // The peer's entry, made (value-initialised) if it has none.
  T& operator[](int peer) {
    if (peer == last_peer_ && last_) return *last_;
    T& entry = entries_[peer];
    last_peer_ = peer;
    last_ = &entry;
    return entry;
  }
  // Null if the peer has no entry.
  T* find(int peer) {
    if (peer == last_peer_) return last_;
    auto it = entries_.find(peer);
    return it == entries_.end() ? nullptr : &it->second;
  }
  const T* find(int peer) const { return const_cast<PeerMap*>(this)->find(peer); }
  size_t size() const { return entries_.size(); }

  // Calls visit(peer, entry) for each entry, in no particular order. `visit` must not make
  // entries (operator[]): a new one may rehash the map under the walk. find() is safe.
  template <typename Visit>
  void for_each(Visit visit) {
    for (auto& [peer, entry] : entries_)
      visit(peer, entry);
  }
  template <typename Visit>
  void for_each(Visit visit) const {
    for (const auto& [peer, entry] : entries_)
      visit(peer, entry);
  }

 private:
  std::unordered_map<int, T> entries_;  // node-based: entries never move
  int last_peer_ = -1;
  T* last_ = nullptr;
};

}  // namespace ibcoll::transport
