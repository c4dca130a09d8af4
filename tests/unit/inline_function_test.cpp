// InlineFunction: small callables live inside it and large ones on the heap; either way every
// callable is destroyed exactly once, moves carry it along, and the call reaches it.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <memory>

#include "base/inline_function.h"

namespace ibcoll {
namespace {

using Callback = InlineFunction<int(int), 48>;

// Counts live copies of itself, so a leak or a double destruction shows.
struct Counted {
  explicit Counted(int* counter) : live(counter) { ++*live; }
  Counted(Counted&& other) noexcept : live(other.live) { ++*live; }
  Counted(const Counted& other) : live(other.live) { ++*live; }
  ~Counted() { --*live; }
  int* live;
};

TEST(InlineFunction, SmallCallablesAreCalledMovedAndDestroyedOnce) {
  int live = 0;
  {
    Counted counted(&live);
    Callback f = [c = std::move(counted), add = 2](int x) { return x + add + (*c.live > 0); };
    EXPECT_EQ(f(1), 4);
    Callback g = std::move(f);
    EXPECT_FALSE(f);
    ASSERT_TRUE(g);
    EXPECT_EQ(g(10), 13);
    f = std::move(g);
    EXPECT_EQ(f(0), 3);
  }
  EXPECT_EQ(live, 0);
}

TEST(InlineFunction, LargeCallablesGoToTheHeapAndBehaveAlike) {
  int live = 0;
  {
    std::array<int, 32> big{};  // 128 bytes: more than the inline capacity
    big[31] = 5;
    Callback f = [big, c = Counted(&live)](int x) { return x + big[31]; };
    EXPECT_EQ(f(1), 6);
    Callback g = std::move(f);
    EXPECT_EQ(g(2), 7);
    EXPECT_EQ(live, 1);
    g = nullptr;
    EXPECT_EQ(live, 0);
  }
  EXPECT_EQ(live, 0);
}

// A callable that tells where it lives: inline, a move puts it elsewhere; on the heap, it stays.
template <size_t Bytes>
struct WhereAmI {
  std::array<char, Bytes> pad{};
  int operator()(int) const {
    return static_cast<int>(reinterpret_cast<uintptr_t>(this) & 0xfffffff);
  }
};

TEST(InlineFunction, StorageIsInlineUpToTheCapacity) {
  Callback small = WhereAmI<40>{};
  const int small_before = small(0);
  Callback small_moved = std::move(small);
  EXPECT_NE(small_moved(0), small_before);

  Callback big = WhereAmI<64>{};
  const int big_before = big(0);
  Callback big_moved = std::move(big);
  EXPECT_EQ(big_moved(0), big_before);
}

TEST(InlineFunction, AssigningOverACallableDestroysIt) {
  int first = 0, second = 0;
  Callback f = [c = Counted(&first)](int) { return 1; };
  f = [c = Counted(&second)](int) { return 2; };
  EXPECT_EQ(first, 0);
  EXPECT_EQ(second, 1);
  EXPECT_EQ(f(0), 2);
}

}  // namespace
}  // namespace ibcoll
