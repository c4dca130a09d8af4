#include "transport/shm/slot_binding.h"

#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bitset>
#include <string>
#include <utility>

#include "base/digest.h"
#include "base/log.h"
#include "base/status.h"

namespace ibcoll::transport::shm {
namespace {

// The directory's lock, held for a few loads and stores; a waiter that finds its holder's
// process gone takes it over.
class DirectoryLock {
 public:
  DirectoryLock(const SlotRegion& region, int local_rank) : lock_(region.directory().lock) {
    const auto me = static_cast<uint32_t>(local_rank + 1);
    for (uint32_t tries = 1;; ++tries) {
      uint32_t holder = 0;
      if (lock_.compare_exchange_weak(holder, me, std::memory_order_acquire)) return;
      if (holder != 0 && tries % kTriesPerLivenessCheck == 0 &&
          !region.alive(static_cast<int>(holder) - 1) &&
          lock_.compare_exchange_strong(holder, me, std::memory_order_acquire)) {
        IBCOLL_LOG(warn, "the slot directory's lock was held by local rank "
                             << holder - 1 << ", whose process is gone: taken over");
        return;
      }
      sched_yield();  // its holder may be waiting for this core
    }
  }
  ~DirectoryLock() { lock_.store(0, std::memory_order_release); }
  DirectoryLock(const DirectoryLock&) = delete;
  DirectoryLock& operator=(const DirectoryLock&) = delete;

 private:
  static constexpr uint32_t kTriesPerLivenessCheck = 1024;
  std::atomic_ref<uint32_t> lock_;
};

// Which sets entries hold.
std::bitset<SlotRegion::kSets> held_sets(const SlotRegion::Directory& directory) {
  std::bitset<SlotRegion::kSets> held;
  for (int e = 0; e < SlotRegion::kEntries; ++e) {
    if (directory.id_plus_one[e] == 0) continue;
    if (const int set = directory.entries[e].set; set >= 0) held.set(static_cast<size_t>(set));
  }
  return held;
}

// The lowest set no entry holds, or kNoSet. Freed sets beyond the warm ones give back the
// highest first, so the lowest free sets are the warm ones.
int free_set(const SlotRegion::Directory& directory) {
  const auto held = held_sets(directory);
  for (int s = 0; s < SlotRegion::kSets; ++s)
    if (!held.test(static_cast<size_t>(s))) return s;
  return SlotRegion::kNoSet;
}

// A set's words that say how far its calls have gone, zeroed for a new communicator (a warm
// set keeps its last communicator's; a cold one shares pages with its neighbours).
void clear(const SlotRegion& region, int set) {
  for (int l = 0; l < region.local_ranks(); ++l) {
    SlotRegion::Slot& slot = region.slot(set, l);
    slot.abandoned = {};
    slot.copied = {};
    for (auto& buffer : slot.buffers)
      buffer.ready = 0;
    slot.staging.contributed = slot.staging.reduced = slot.staging.finished = 0;
  }
}

// The whole pages of a set's slots go back to the kernel (the segment's file is sparse).
void give_back(const SlotRegion& region, int set) {
  region.directory().has_pages[set] = 0;
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(&region.slot(set, 0));
  const auto end = reinterpret_cast<uintptr_t>(&region.slot(set, region.local_ranks() - 1) + 1);
  const uintptr_t first = (begin + page - 1) / page * page, last = end / page * page;
  if (last > first && madvise(reinterpret_cast<void*>(first), last - first, MADV_REMOVE) != 0) {
    IBCOLL_LOG(debug, "slot set " << set << " keeps its pages: madvise(MADV_REMOVE) failed, errno "
                                  << errno);
  }
}

// `set` has just been freed: it stays warm, and the highest warm free set beyond kWarmSets
// gives its pages back.
void cool_down(const SlotRegion& region, int set) {
  auto& directory = region.directory();
  directory.has_pages[set] = 1;
  const auto held = held_sets(directory);
  int warm = 0, highest = SlotRegion::kNoSet;
  for (int s = 0; s < SlotRegion::kSets; ++s) {
    if (held.test(static_cast<size_t>(s)) || !directory.has_pages[s]) continue;
    ++warm;
    highest = s;
  }
  if (warm > SlotRegion::kWarmSets) give_back(region, highest);
}

}  // namespace

SlotBinding::SlotBinding(const SlotRegion& region, uint32_t id, uint64_t stamp,
                         std::span<const int> members, int local_rank)
    : region_(&region), local_rank_(local_rank), members_(members.begin(), members.end()) {
  const auto first = static_cast<uint32_t>(*std::min_element(members.begin(), members.end()));
  const uint64_t digest = digest_of(members);
  DirectoryLock lock(region, local_rank);
  auto& directory = region.directory();
  auto& entries = directory.entries;
  int free_entry = -1;
  for (int e = 0; e < SlotRegion::kEntries && entry_ < 0; ++e) {
    if (directory.id_plus_one[e] == id + 1 && entries[e].first_member == first &&
        entries[e].stamp == stamp && entries[e].members_digest == digest) {
      entry_ = e;
    }
    if (directory.id_plus_one[e] == 0 && free_entry < 0) free_entry = e;
  }
  if (entry_ < 0) {
    if (free_entry < 0) {
      region_ = nullptr;
      throw Error(Code::system_error,
                  "communicator " + std::to_string(id) + ": this node already holds " +
                      std::to_string(SlotRegion::kEntries) + " live communicators");
    }
    entry_ = free_entry;
    int set = free_set(directory);
    if (set != SlotRegion::kNoSet) {
      try {
        if (!directory.has_pages[set]) region.check_room(set);  // a warm one has its pages
        clear(region, set);
      } catch (const Error& e) {  // a full /dev/shm: the communicator goes without slots
        IBCOLL_LOG(warn, "communicator " << id << " runs without slots: " << e.what());
        set = SlotRegion::kNoRoom;
      }
    }
    auto& entry = entries[entry_];
    entry.first_member = first;
    entry.stamp = stamp;
    entry.members_digest = digest;
    entry.set = set;
    entry.members = static_cast<uint32_t>(members.size());
    entry.bound = 0;
    entry.let_go = 0;
    entry.let_go_mask = 0;
    std::atomic_ref<uint32_t>(directory.id_plus_one[entry_])
        .store(id + 1, std::memory_order_release);
  }
  ++entries[entry_].bound;
  lacked_room_ = entries[entry_].set == SlotRegion::kNoRoom;
  set_ = lacked_room_ ? SlotRegion::kNoSet : entries[entry_].set;
}

bool SlotBinding::only_the_dead_hold(const SlotRegion::Directory::Entry& entry) const {
  if (members_.size() > 64 || members_.size() != entry.members) return false;
  for (size_t place = 0; place < members_.size(); ++place) {
    if (!(entry.let_go_mask >> place & 1) && region_->alive(members_[place])) return false;
  }
  return true;
}

SlotBinding::SlotBinding(SlotBinding&& other) noexcept
    : region_(std::exchange(other.region_, nullptr)),
      entry_(other.entry_),
      set_(other.set_),
      lacked_room_(other.lacked_room_),
      local_rank_(other.local_rank_),
      members_(std::move(other.members_)) {}

SlotBinding& SlotBinding::operator=(SlotBinding&& other) noexcept {
  if (this != &other) {
    release();
    region_ = std::exchange(other.region_, nullptr);
    entry_ = other.entry_;
    set_ = other.set_;
    lacked_room_ = other.lacked_room_;
    local_rank_ = other.local_rank_;
    members_ = std::move(other.members_);
  }
  return *this;
}

SlotBinding::~SlotBinding() {
  release();
}

void SlotBinding::release(bool no_more_binders) noexcept {
  if (!region_) return;
  DirectoryLock lock(*region_, local_rank_);
  auto& directory = region_->directory();
  auto& entry = directory.entries[entry_];
  if (no_more_binders) entry.members = entry.bound;
  const auto place = std::find(members_.begin(), members_.end(), local_rank_) - members_.begin();
  if (place < 64) entry.let_go_mask |= uint64_t{1} << place;
  if (++entry.let_go == entry.members || only_the_dead_hold(entry)) {
    std::atomic_ref<uint32_t>(directory.id_plus_one[entry_]).store(0, std::memory_order_release);
    const int set = entry.set;
    entry = {};
    if (set >= 0) cool_down(*region_, set);
  }
  region_ = nullptr;
}

}  // namespace ibcoll::transport::shm
