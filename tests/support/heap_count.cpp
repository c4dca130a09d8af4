#include "tests/support/heap_count.h"

#include <atomic>
#include <cstdlib>
#include <new>

namespace ibcoll::testing {
namespace {

#if !defined(__SANITIZE_ADDRESS__)
std::atomic<uint64_t> allocations{0};
#endif

}  // namespace

std::optional<uint64_t> heap_allocations() {
#if defined(__SANITIZE_ADDRESS__)
  return std::nullopt;
#else
  return allocations.load(std::memory_order_relaxed);
#endif
}

}  // namespace ibcoll::testing

#if !defined(__SANITIZE_ADDRESS__)
// The other forms (arrays, nothrow) call this one; the default operator delete frees what malloc
// gave. Aligned allocations are not counted.
void* operator new(size_t bytes) {
  ibcoll::testing::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* block = std::malloc(bytes == 0 ? 1 : bytes)) return block;
  throw std::bad_alloc();
}
#endif
