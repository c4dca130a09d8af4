#include "collectives/call_memory.h"

#include <array>
#include <bit>
#include <new>

namespace ibcoll::collectives {
namespace {

constexpr size_t kSmallest = 64;
constexpr int kClasses = std::countr_zero(CallMemory::kLargestKept / kSmallest) + 1;

// Size classes are powers of two from kSmallest; a kept block links to the next one.
int class_of(size_t bytes) {
  return bytes <= kSmallest ? 0 : std::bit_width(bytes - 1) - std::countr_zero(kSmallest);
}

// This thread's kept blocks: trivially destructible, so that blocks freed by destructors that
// run after its exit clean-up (Reaper) still find it; they go to the heap then.
struct Kept {
  struct Block {
    Block* next;
  };
  std::array<Block*, kClasses> first;
  std::array<int, kClasses> count;
  size_t heap_blocks;
  bool reaper_armed;  // this thread's Reaper exists, so its exit frees the blocks
  bool gone;          // the thread is exiting: no more keeping
};
thread_local Kept kept{};

struct Reaper {
  void arm() {}  // a use: constructs this thread's, so that its exit runs the destructor
  ~Reaper() {
    Kept& k = kept;
    k.gone = true;
    for (Kept::Block* b : k.first) {
      while (b) {
        Kept::Block* next = b->next;
        ::operator delete(b);
        b = next;
      }
    }
  }
};
thread_local Reaper reaper;

}  // namespace

void* CallMemory::take(size_t bytes) {
  Kept& k = kept;  // one look-up of the thread's storage per call: it is not free in a library
  if (!CallMemory::kRecycles || bytes > kLargestKept || k.gone) return ::operator new(bytes);
  const auto c = static_cast<size_t>(class_of(bytes));
  if (Kept::Block* b = k.first[c]) {
    k.first[c] = b->next;
    --k.count[c];
    return b;
  }
  if (!k.reaper_armed) {
    reaper.arm();
    k.reaper_armed = true;
  }
  ++k.heap_blocks;
  return ::operator new(kSmallest << c);
}

void CallMemory::give(void* block, size_t bytes) noexcept {
  if (!block) return;
  Kept& k = kept;
  if (!CallMemory::kRecycles || bytes > kLargestKept || k.gone) return ::operator delete(block);
  const auto c = static_cast<size_t>(class_of(bytes));
  if (k.count[c] >= kKept) return ::operator delete(block);
  auto* b = static_cast<Kept::Block*>(block);
  b->next = k.first[c];
  k.first[c] = b;
  ++k.count[c];
}

size_t CallMemory::heap_blocks_taken() {
  return kept.heap_blocks;
}

}  // namespace ibcoll::collectives
