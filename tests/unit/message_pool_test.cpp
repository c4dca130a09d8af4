// MessagePool: a steady stream of early arrivals reuses the pool's blocks (nothing more from
// the heap), and a burst past what the pool keeps goes back to the heap once all of it is
// given back, not while any block is still held.
#include "transport/message_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace ibcoll::transport {
namespace {

TEST(MessagePool, ASteadyStreamReusesItsBlocks) {
  MessagePool pool;
  void* first = pool.allocate(1000, 1);
  pool.deallocate(first, 1000, 1);
  const size_t held = pool.held_bytes();
  EXPECT_GT(held, 0u);  // kept for the next message, below what a burst is
  for (int i = 0; i < 1000; ++i) {
    void* block = pool.allocate(1000, 1);
    pool.deallocate(block, 1000, 1);
  }
  EXPECT_EQ(pool.held_bytes(), held);
}

TEST(MessagePool, ABurstGoesBackOnceAllOfItIsGivenBack) {
  MessagePool pool;
  constexpr size_t kBytes = 60 << 10;
  std::vector<void*> blocks;
  while (blocks.size() * kBytes <= 2 * MessagePool::kKeptBytes)
    blocks.push_back(pool.allocate(kBytes, 1));
  EXPECT_GE(pool.held_bytes(), blocks.size() * kBytes);
  void* last = blocks.back();
  blocks.pop_back();
  for (void* block : blocks)
    pool.deallocate(block, kBytes, 1);
  EXPECT_GT(pool.held_bytes(), MessagePool::kKeptBytes);  // one block still held: all kept
  pool.deallocate(last, kBytes, 1);
  EXPECT_EQ(pool.held_bytes(), 0u);
  void* again = pool.allocate(kBytes, 1);  // and it still works
  EXPECT_NE(again, nullptr);
  pool.deallocate(again, kBytes, 1);
}

TEST(MessagePool, LargeMessagesComeFromTheHeapAndGoBackAtOnce) {
  MessagePool pool;
  void* block = pool.allocate(size_t{1} << 20, 1);
  EXPECT_GE(pool.held_bytes(), size_t{1} << 20);
  pool.deallocate(block, size_t{1} << 20, 1);
  EXPECT_LT(pool.held_bytes(), size_t{1} << 20);
}

}  // namespace
}  // namespace ibcoll::transport
