// RegistrationCache: memory registrations for rendezvous buffers. With caching on, a
// registration outlives the transfer and is found again for any buffer inside it (LRU, bounded
// by bytes); with caching off each acquire registers and each release deregisters.
// Caching user buffers is only safe while their pages stay mapped: a buffer freed and
// reallocated at the same address would hit a stale registration. That is why it is opt-in
// (IBCOLL_MR_CACHE) until memory hooks invalidate entries on unmap.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>

#include "transport/verbs/handles.h"

namespace ibcoll::transport::verbs {

class RegistrationCache {
 public:
  struct Entry {
    uintptr_t begin = 0, end = 0;
    MemoryRegion mr;
    int users = 0;
    std::list<Entry*>::iterator lru;  // valid while users == 0
    Access access = Access::device_reads;
    bool valid = true;  // false once invalidated: never found again
  };
  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0;
    size_t cached_bytes = 0;
  };

  RegistrationCache(ibv_pd* pd, bool enabled, size_t capacity_bytes)
      : pd_(pd), enabled_(enabled), capacity_(capacity_bytes) {}
  ~RegistrationCache();
  RegistrationCache(const RegistrationCache&) = delete;
  RegistrationCache& operator=(const RegistrationCache&) = delete;

  // The returned entry covers [address, address + length), with `access`, until release().
  Entry* acquire(const void* address, size_t length, Access access);
  void release(Entry* entry);
  // Deregisters the entry's memory now, whoever else uses it (their transfers fail), so that
  // nothing reaches it through its keys any more; release() still follows.
  void invalidate(Entry* entry);
  const Stats& stats() const { return stats_; }

 private:
  void erase(std::map<uintptr_t, Entry>::iterator it);
  void evict_to_capacity();

  ibv_pd* pd_;
  bool enabled_;
  size_t capacity_;
  std::map<uintptr_t, Entry> entries_;  // by begin address
  std::list<Entry*> idle_;              // unused entries, least recently used first
  Stats stats_;
};

}  // namespace ibcoll::transport::verbs
