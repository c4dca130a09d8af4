// MatchTable: pairs posted receives with arriving messages by (peer, tag), first come first
// served within each key, which keeps a sender's messages in order. Arrivals with no receive
// posted yet wait in the unexpected queue; receives with no arrival yet wait in the posted one.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <unordered_map>

namespace ibcoll::transport {

template <typename Posted, typename Arrival>
class MatchTable {
 public:
  struct Key {
    int peer;
    uint64_t tag;
    bool operator==(const Key&) const = default;
  };

  // An arrival takes the oldest receive posted for its key, if any; else it waits.
  std::optional<Posted> take_posted(Key key) { return pop(posted_, key); }
  void add_unexpected(Key key, Arrival arrival) { unexpected_[key].push_back(std::move(arrival)); }

  // A new receive takes the oldest unexpected arrival for its key, if any; else it waits.
  std::optional<Arrival> take_unexpected(Key key) { return pop(unexpected_, key); }
  void add_posted(Key key, Posted posted) { posted_[key].push_back(std::move(posted)); }

  // Removes every posted receive from `peer`, handing each to `fail`.
  void fail_peer(int peer, const std::function<void(Posted&)>& fail) {
    for (auto it = posted_.begin(); it != posted_.end();) {
      if (it->first.peer != peer) {
        ++it;
        continue;
      }
      auto waiting = std::move(it->second);
      it = posted_.erase(it);
      for (Posted& p : waiting)
        fail(p);
    }
  }
  size_t posted_count(int peer) const {
    size_t n = 0;
    for (const auto& [key, queue] : posted_)
      n += key.peer == peer ? queue.size() : 0;
    return n;
  }
  size_t unexpected_count() const {
    size_t n = 0;
    for (const auto& entry : unexpected_)
      n += entry.second.size();
    return n;
  }

 private:
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<uint64_t>()(k.tag * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(k.peer));
    }
  };
  template <typename T>
  static std::optional<T> pop(std::unordered_map<Key, std::deque<T>, KeyHash>& map, Key key) {
    auto it = map.find(key);
    if (it == map.end()) return std::nullopt;
    T front = std::move(it->second.front());
    it->second.pop_front();
    if (it->second.empty()) map.erase(it);
    return front;
  }

  std::unordered_map<Key, std::deque<Posted>, KeyHash> posted_;
  std::unordered_map<Key, std::deque<Arrival>, KeyHash> unexpected_;
};

}  // namespace ibcoll::transport
