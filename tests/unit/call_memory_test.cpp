// The call memory: calls in a row reuse the blocks of the calls before them, so a steady stream
// of calls takes nothing more from the heap; what it keeps is bounded, and a thread that ends
// leaves nothing kept behind it. (Under AddressSanitizer it is the heap itself: skipped.)
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "collectives/call_memory.h"
#include "tests/support/heap_count.h"

namespace ibcoll::collectives {
namespace {

// One "call": an operation, a task and a scratch buffer, made and freed.
void one_call() {
  void* operation = CallMemory::take(200);
  void* task = CallMemory::take(520);
  void* scratch = CallMemory::take(8 << 10);
  CallMemory::give(scratch, 8 << 10);
  CallMemory::give(task, 520);
  CallMemory::give(operation, 200);
}

TEST(CallMemory, CallsInARowTakeNothingMoreFromTheHeap) {
  if (!CallMemory::kRecycles) GTEST_SKIP() << "built with AddressSanitizer: the heap itself";
  std::thread([] {
    one_call();
    const size_t after_first = CallMemory::heap_blocks_taken();
    EXPECT_EQ(after_first, 3u);
    for (int i = 0; i < 1000; ++i)
      one_call();
    EXPECT_EQ(CallMemory::heap_blocks_taken(), after_first);
    // Blocks too large to keep, and more of one size than are kept, go back to the heap.
    void* large = CallMemory::take(CallMemory::kLargestKept + 1);
    CallMemory::give(large, CallMemory::kLargestKept + 1);
    std::vector<void*> many;
    for (int i = 0; i < 3 * CallMemory::kKept; ++i)
      many.push_back(CallMemory::take(100));
    for (void* block : many)
      CallMemory::give(block, 100);
    const size_t before = CallMemory::heap_blocks_taken();
    many.resize(CallMemory::kKept + 1);
    for (void*& block : many)
      block = CallMemory::take(100);
    // kKept of them were kept, and no more.
    EXPECT_EQ(CallMemory::heap_blocks_taken(), before + 1);
    for (void* block : many)
      CallMemory::give(block, 100);
  }).join();
}

// A block freed on another thread than the one that took it is kept there; a thread that ends
// frees what it kept: after many threads came and went, each taking blocks and keeping some,
// every block the heap gave is back (the heap's own count, new against delete), and blocks
// keep working.
TEST(CallMemory, BlocksCrossThreadsAndThreadsThatEndFreeTheirs) {
  if (!CallMemory::kRecycles) GTEST_SKIP() << "built with AddressSanitizer: the heap itself";
  const auto live = [] { return *testing::heap_allocations() - *testing::heap_frees(); };
  const uint64_t before = live();
  for (int t = 0; t < 50; ++t) {
    void* block = nullptr;
    std::thread([&] { block = CallMemory::take(300); }).join();
    std::thread([&] {
      CallMemory::give(block, 300);  // kept by this thread, with the blocks of its call
      one_call();
    }).join();
  }
  EXPECT_EQ(live(), before) << "blocks kept by threads that ended were never freed";
  one_call();
}

}  // namespace
}  // namespace ibcoll::collectives
