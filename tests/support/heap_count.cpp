#include "tests/support/heap_count.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <new>

namespace ibcoll::testing {
namespace {

#if !defined(__SANITIZE_ADDRESS__)
std::atomic<uint64_t> allocations{0}, frees{0};
#endif

}  // namespace

std::optional<uint64_t> heap_allocations() {
#if defined(__SANITIZE_ADDRESS__)
  return std::nullopt;
#else
  return allocations.load(std::memory_order_relaxed);
#endif
}

std::optional<uint64_t> heap_frees() {
#if defined(__SANITIZE_ADDRESS__)
  return std::nullopt;
#else
  return frees.load(std::memory_order_relaxed);
#endif
}

}  // namespace ibcoll::testing

#if !defined(__SANITIZE_ADDRESS__)
// The other forms (arrays, nothrow) call these; the default operator delete frees what malloc
// or aligned_alloc gave.
void* operator new(size_t bytes) {
  ibcoll::testing::allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* block = std::malloc(bytes == 0 ? 1 : bytes)) return block;
  throw std::bad_alloc();
}
// Memory resources (std::pmr::new_delete_resource, a pool's upstream) allocate with alignment.
void* operator new(size_t bytes, std::align_val_t alignment) {
  ibcoll::testing::allocations.fetch_add(1, std::memory_order_relaxed);
  const auto align = std::max(static_cast<size_t>(alignment), sizeof(void*));
  const size_t rounded = (std::max<size_t>(bytes, 1) + align - 1) / align * align;
  if (void* block = std::aligned_alloc(align, rounded)) return block;
  throw std::bad_alloc();
}
// The array forms call these.
void operator delete(void* block) noexcept {
  if (block) ibcoll::testing::frees.fetch_add(1, std::memory_order_relaxed);
  std::free(block);
}
void operator delete(void* block, size_t) noexcept {
  operator delete(block);
}
void operator delete(void* block, std::align_val_t) noexcept {
  operator delete(block);
}
void operator delete(void* block, size_t, std::align_val_t) noexcept {
  operator delete(block);
}
#endif
