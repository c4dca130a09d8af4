// Fifo: first in first out, removal from the middle, and the storage kept across a stream of
// messages (the point of it: a std::deque takes and frees blocks as its front moves on).
#include "base/fifo.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

namespace ibcoll {
namespace {

std::vector<int> contents(Fifo<int>& f) {
  return {f.begin(), f.end()};
}

TEST(Fifo, FirstInFirstOutAndRemovalFromTheMiddle) {
  Fifo<int> f;
  EXPECT_TRUE(f.empty());
  for (int i = 0; i < 5; ++i)
    f.push_back(i);
  f.pop_front();
  EXPECT_EQ(f.front(), 1);
  auto next = f.erase(f.begin() + 2);  // 3
  EXPECT_EQ(*next, 4);
  EXPECT_EQ(contents(f), (std::vector<int>{1, 2, 4}));
  f.erase(f.begin());
  EXPECT_EQ(contents(f), (std::vector<int>{2, 4}));
  EXPECT_EQ(f.size(), 2u);
}

TEST(Fifo, AQueueNeverEmptyKeepsItsOrderAndStaysBounded) {
  Fifo<int> f;
  f.push_back(0);
  const int *lowest = nullptr, *highest = nullptr;
  for (int i = 1; i < 10000; ++i) {
    f.push_back(i);
    f.pop_front();
    ASSERT_EQ(f.front(), i);
    ASSERT_EQ(f.size(), 1u);
    if (i < 5000) continue;  // once grown to its working size, it moves the item down
    lowest = !lowest || &f.front() < lowest ? &f.front() : lowest;
    highest = !highest || &f.front() > highest ? &f.front() : highest;
  }
  EXPECT_LT(highest - lowest, 256);
}

TEST(Fifo, AStreamOfMessagesReusesTheSameStorage) {
  Fifo<int> f;
  const int* first = nullptr;
  for (int round = 0; round < 100; ++round) {
    for (int i = 0; i < 3; ++i)
      f.push_back(i);
    if (!first) first = &f.front();
    EXPECT_EQ(&f.front(), first) << "round " << round;
    while (!f.empty())
      f.pop_front();
  }
}

TEST(Fifo, ItemsTakenOutLetGoOfTheirResourcesAtOnce) {
  Fifo<std::shared_ptr<int>> f;
  auto held = std::make_shared<int>(7);
  f.push_back(held);
  f.push_back(std::make_shared<int>(8));
  f.pop_front();
  EXPECT_EQ(held.use_count(), 1);
  Fifo<std::shared_ptr<int>> moved = std::move(f);
  EXPECT_TRUE(f.empty());
  EXPECT_EQ(*moved.front(), 8);
}

}  // namespace
}  // namespace ibcoll
