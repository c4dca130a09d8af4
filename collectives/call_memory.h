// CallMemory: where the objects of one collective call live (its operation, task, call check
// and scratch). Each call makes and frees the same few objects; this thread keeps the blocks
// it freed, by size class, and hands them to the next call, so a steady stream of calls
// allocates nothing (a call through the C API used to make 2-3 heap allocations). Bounded:
// at most kKept blocks per class are kept; larger blocks go to the heap. Under AddressSanitizer
// it is the heap, so that a use after free is still caught.
#pragma once

#include <cstddef>

namespace ibcoll::collectives {

class CallMemory {
 public:
#if defined(__SANITIZE_ADDRESS__)
  static constexpr bool kRecycles = false;
#else
  static constexpr bool kRecycles = true;
#endif
  static constexpr size_t kLargestKept = 64 << 10;
  static constexpr int kKept = 8;

  static void* take(size_t bytes);
  // `bytes` as given to take().
  static void give(void* block, size_t bytes) noexcept;

  // Blocks this thread took from the heap to keep, in its life (for tests).
  static size_t heap_blocks_taken();
};

// Objects of a call: new and delete through CallMemory.
struct CallObject {
  static void* operator new(size_t bytes) { return CallMemory::take(bytes); }
  static void operator delete(void* block, size_t bytes) noexcept {
    CallMemory::give(block, bytes);
  }
};

// A call's shared state (std::allocate_shared) through CallMemory.
template <typename T>
struct CallAllocator {
  using value_type = T;
  CallAllocator() = default;
  template <typename U>
  CallAllocator(const CallAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(CallMemory::take(n * sizeof(T))); }
  void deallocate(T* block, size_t n) noexcept { CallMemory::give(block, n * sizeof(T)); }
  template <typename U>
  bool operator==(const CallAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace ibcoll::collectives
