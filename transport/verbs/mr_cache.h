// RegistrationCache: memory registrations for rendezvous buffers. With caching on, a
// registration outlives the transfer and is found again for any buffer inside it (LRU, bounded
// by bytes); with caching off each acquire registers and each release deregisters.
// Caching user buffers is only safe while their pages stay mapped: a buffer freed and another
// mapped at the same address would meet the old pages' registration. So before each look-up
// the cache drops every entry whose memory was unmapped since (UnmapWatch, libucm's hooks), and
// IBCOLL_MR_CACHE=auto caches only where that watch works.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <string>

#include "transport/ucx/unmap_watch.h"
#include "transport/verbs/handles.h"
#include "transport/verbs/options.h"

namespace ibcoll::transport::verbs {

class RegistrationCache {
 public:
  struct Entry {
    uintptr_t begin = 0, end = 0;
    MemoryRegion mr;
    int users = 0;
    std::list<Entry*>::iterator lru;  // valid while idle
    Access access = Access::device_reads;
    bool valid = true;  // false once invalidated: never found again
    bool idle = false;  // unused, in the LRU list
  };
  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0;
    uint64_t unmapped = 0;  // entries dropped because their memory left the address space
    size_t cached_bytes = 0;
  };

  RegistrationCache(ibv_pd* pd, CacheMode mode, size_t capacity_bytes);
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // The returned entry covers [address, address + length), with `access`, until release().
  Entry* acquire(const void* address, size_t length, Access access);
  void release(Entry* entry);
  // Ends a use whose transfer went wrong (withdrawn, its peer failed or gave it up): the
  // entry's memory is deregistered now, whoever else uses it (their transfers fail), so that
  // nothing reaches it through its keys any more, cached or not.
  void revoke(Entry* entry);
  const Stats& stats() const { return stats_; }
  bool enabled() const { return enabled_; }
  // Caching, and every unmap that could make an entry stale is reported to it.
  bool trusted() const { return enabled_ && watched_ && ucx::UnmapWatch::kSeesTheHeap; }
  // "on (libucm reports unmaps)", "off (IBCOLL_MR_CACHE=auto: WHY)", ...: for logs and
  // ibcoll_info.
  static std::string describe(CacheMode mode);

 private:
  // Drops the entries whose memory was unmapped since the last look (all, if the watch lost
  // some); one still in use is only taken out of reach and goes at its release.
  void forget_unmapped();
  void forget(uintptr_t begin, uintptr_t end);
  void erase(std::map<uintptr_t, Entry>::iterator it);
  void evict_to_capacity();

  ibv_pd* pd_;
  bool enabled_;
  size_t capacity_;
  bool watched_ = false;  // unmaps are reported (UnmapWatch)
  uint64_t unmaps_seen_ = 0;
  size_t longest_ = 0;  // the longest entry's length, which bounds an overlap search
  std::map<uintptr_t, Entry> entries_;  // by begin address
  std::list<Entry*> idle_;              // unused entries, least recently used first
  Stats stats_;
};

}  // namespace ibcoll::transport::verbs
