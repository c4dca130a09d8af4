#include "transport/ucx/unmap_watch.h"

#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>

#ifdef IBCOLL_HAVE_UCX
#include <ucm/api/ucm.h>
#endif

namespace ibcoll::transport::ucx {
namespace {

// Written by the handler on any thread; never allocated or freed.
std::array<AddressRange, UnmapWatch::kRing> ring;
std::atomic<uint64_t> written{0};
std::atomic_flag ring_busy = ATOMIC_FLAG_INIT;

struct RingLock {
  RingLock() {
    while (ring_busy.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~RingLock() { ring_busy.clear(std::memory_order_release); }
};

#ifdef IBCOLL_HAVE_UCX
void on_unmapped(ucm_event_type_t type, ucm_event_t* event, void*) {
  if (type != UCM_EVENT_VM_UNMAPPED || event->vm_unmapped.size == 0) return;
  const auto begin = reinterpret_cast<uintptr_t>(event->vm_unmapped.address);
  RingLock held;
  const uint64_t at = written.load(std::memory_order_relaxed);
  ring[at % UnmapWatch::kRing] = {begin, begin + event->vm_unmapped.size};
  written.store(at + 1, std::memory_order_release);
}

// libucm may accept the handler and still miss unmaps (hooks disabled by UCX_MEM_EVENTS=no, or
// events declared external by a library that never forwards them): see one happen.
bool an_unmap_is_seen() {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void* probe = mmap(nullptr, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  const uint64_t before = UnmapWatch::position();
  munmap(probe, page);
  bool seen = false, lost = false;
  UnmapWatch::since(
      before, [&](AddressRange r) { seen = seen || r.begin == reinterpret_cast<uintptr_t>(probe); },
      lost);
  return seen || lost;
}

// The handler's registration with libucm, for as long as this library is loaded: libucm must
// never call into code that dlclose took away (Open MPI unloads its components at finalize).
class Subscription {
 public:
  Subscription() {
    const ucs_status_t status =
        ucm_set_event_handler(UCM_EVENT_VM_UNMAPPED, -1, on_unmapped, nullptr);
    if (status != UCS_OK) {
      why_not_ = "libucm refused a handler for UCM_EVENT_VM_UNMAPPED (status " +
                 std::to_string(static_cast<int>(status)) + ")";
      return;
    }
    subscribed_ = true;
    if (!an_unmap_is_seen()) {
      why_not_ =
          "libucm's hooks did not report an munmap (UCX_MEM_EVENTS or UCX_MEM_MMAP_HOOK_MODE?)";
    }
  }
  ~Subscription() {
    if (subscribed_) ucm_unset_event_handler(UCM_EVENT_VM_UNMAPPED, on_unmapped, nullptr);
  }
  Subscription(const Subscription&) = delete;
  Subscription& operator=(const Subscription&) = delete;

  const std::string& why_not() const { return why_not_; }

 private:
  bool subscribed_ = false;
  std::string why_not_;
};

const std::string& install() {
  static const Subscription subscription;
  return subscription.why_not();
}
#else
const std::string& install() {
  static const std::string why_not = "built without UCX (IBCOLL_WITH_UCX=OFF)";
  return why_not;
}
#endif

}  // namespace

const std::string& UnmapWatch::start() {
  return install();
}

uint64_t UnmapWatch::position() {
  return written.load(std::memory_order_acquire);
}

uint64_t UnmapWatch::since(uint64_t seen, FunctionRef<void(AddressRange)> each, bool& lost) {
  // Copied out in chunks and handed over outside the lock: `each` may free memory, and an
  // munmap there calls the handler on this thread.
  constexpr size_t kChunk = 64;
  std::array<AddressRange, kChunk> chunk;
  while (seen != position()) {
    size_t taken = 0;
    {
      RingLock held;
      const uint64_t now = written.load(std::memory_order_relaxed);
      if (now - seen > kRing) {
        lost = true;
        return now;
      }
      for (; taken < kChunk && seen != now; ++taken, ++seen)
        chunk[taken] = ring[seen % kRing];
    }
    for (size_t i = 0; i < taken; ++i)
      each(chunk[i]);
  }
  return seen;
}

}  // namespace ibcoll::transport::ucx
