#include "transport/verbs/mr_cache.h"

#include <algorithm>

namespace ibcoll::transport::verbs {
namespace {
constexpr uintptr_t kPage = 4096;
}

RegistrationCache::RegistrationCache(ibv_pd* pd, CacheMode mode, size_t capacity_bytes)
    : pd_(pd), capacity_(capacity_bytes) {
  watched_ = mode != CacheMode::off && ucx::UnmapWatch::watching();
  enabled_ = mode == CacheMode::on || (watched_ && ucx::UnmapWatch::kSeesTheHeap);
  unmaps_seen_ = ucx::UnmapWatch::position();
}

std::string RegistrationCache::describe(CacheMode mode) {
  if (mode == CacheMode::off) return "off (IBCOLL_MR_CACHE=0)";
  std::string why_not = ucx::UnmapWatch::start();
  if (why_not.empty() && !ucx::UnmapWatch::kSeesTheHeap)
    why_not = "under AddressSanitizer, whose heap libucm cannot watch";
  if (why_not.empty()) return "on (libucm reports unmaps)";
  if (mode == CacheMode::on) {
    return "on (IBCOLL_MR_CACHE=1), though unmaps go unreported (" + why_not +
           "): a buffer freed and another mapped at its address may meet a stale registration";
  }
  return "off (IBCOLL_MR_CACHE=auto: " + why_not + ")";
}

RegistrationCache::~RegistrationCache() {
  idle_.clear();
  entries_.clear();
}

RegistrationCache::Entry* RegistrationCache::acquire(const void* address, size_t length,
                                                     Access access) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(address);
  const uintptr_t end = begin + length;
  if (enabled_) {
    if (watched_) forget_unmapped();
    // The entry starting at or below `begin` with the highest start is the only candidate
    // worth checking first; overlapping registrations are allowed, so this stays simple.
    // Found only with the same access, and a registration peers write into serves one
    // transfer at a time: withdrawing a receive invalidates its registration (no late write
    // may land), and that must break no other transfer.
    auto it = entries_.upper_bound(begin);
    if (it != entries_.begin()) {
      Entry& e = std::prev(it)->second;
      const bool shareable = access != Access::peer_writes || e.users == 0;
      if (e.valid && e.begin <= begin && end <= e.end && e.access == access && shareable) {
        if (e.users++ == 0) {
          idle_.erase(e.lru);
          e.idle = false;
        }
        ++stats_.hits;
        return &e;
      }
    }
  }
  ++stats_.misses;
  // Page-aligned, so neighbouring buffers in the same pages share a registration.
  const uintptr_t page_begin = begin & ~(kPage - 1);
  const uintptr_t page_end = (end + kPage - 1) & ~(kPage - 1);
  MemoryRegion mr =
      register_memory(pd_, reinterpret_cast<void*>(page_begin), page_end - page_begin, access);
  if (auto old = entries_.find(page_begin); old != entries_.end()) {
    if (old->second.users > 0) {
      // A smaller registration at the same start is in use: keep this one out of the cache.
      return new Entry{page_begin, page_end, std::move(mr), 1, {}, access};
    }
    erase(old);
  }
  Entry& e = entries_[page_begin];
  e = Entry{page_begin, page_end, std::move(mr), 1, {}, access};
  stats_.cached_bytes += page_end - page_begin;
  longest_ = std::max<size_t>(longest_, page_end - page_begin);
  return &e;
}

void RegistrationCache::forget_unmapped() {
  bool lost = false;
  unmaps_seen_ = ucx::UnmapWatch::since(
      unmaps_seen_, [&](ucx::AddressRange gone) { forget(gone.begin, gone.end); }, lost);
  if (lost) forget(0, UINTPTR_MAX);
}

void RegistrationCache::forget(uintptr_t begin, uintptr_t end) {
  // Entries start at most longest_ below `begin` if they reach into it.
  auto it = entries_.lower_bound(begin > longest_ ? begin - longest_ : 0);
  while (it != entries_.end() && it->first < end) {
    Entry& e = it->second;
    if (e.end <= begin || !e.valid) {
      ++it;
      continue;
    }
    ++stats_.unmapped;
    if (e.users > 0) {
      e.valid = false;  // its transfer still holds it; erased at its release
      ++it;
    } else {
      erase(it++);
    }
  }
}

void RegistrationCache::release(Entry* entry) {
  auto it = entries_.find(entry->begin);
  if (it == entries_.end() || &it->second != entry) {
    delete entry;  // an uncached registration
    return;
  }
  if (--entry->users > 0) return;
  if (!enabled_ || !entry->valid) {
    erase(it);
    return;
  }
  entry->lru = idle_.insert(idle_.end(), entry);
  entry->idle = true;
  evict_to_capacity();
}

void RegistrationCache::revoke(Entry* entry) {
  entry->mr.reset();
  entry->valid = false;
  release(entry);
}

void RegistrationCache::erase(std::map<uintptr_t, Entry>::iterator it) {
  if (it->second.idle) idle_.erase(it->second.lru);
  stats_.cached_bytes -= it->second.end - it->second.begin;
  entries_.erase(it);
}

void RegistrationCache::evict_to_capacity() {
  while (stats_.cached_bytes > capacity_ && !idle_.empty()) {
    ++stats_.evictions;
    erase(entries_.find(idle_.front()->begin));
  }
}

}  // namespace ibcoll::transport::verbs
