#include "transport/verbs/mr_cache.h"

namespace ibcoll::transport::verbs {
namespace {
constexpr uintptr_t kPage = 4096;
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
        if (e.users++ == 0) idle_.erase(e.lru);
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
  return &e;
}

void RegistrationCache::release(Entry* entry) {
  auto it = entries_.find(entry->begin);
  if (it == entries_.end() || &it->second != entry) {
    delete entry;  // an uncached registration
    return;
  }
  if (--entry->users > 0) return;
  if (!enabled_) {
    erase(it);
    return;
  }
  entry->lru = idle_.insert(idle_.end(), entry);
  evict_to_capacity();
}

void RegistrationCache::invalidate(Entry* entry) {
  entry->mr.reset();
  entry->valid = false;
}

void RegistrationCache::erase(std::map<uintptr_t, Entry>::iterator it) {
  if (it->second.users == 0 && enabled_) idle_.erase(it->second.lru);
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
