// MatchTable: FIFO per (peer, tag), unexpected arrivals kept, failures drain one peer only,
// a withdrawn range of tags takes its arrivals with it.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "transport/match_table.h"

namespace ibcoll::transport {
namespace {

using Table = MatchTable<std::string, int>;

TEST(MatchTable, PostedReceivesMatchInOrderPerKey) {
  Table t;
  t.add_posted({1, 5}, "first");
  t.add_posted({1, 5}, "second");
  t.add_posted({2, 5}, "other peer");
  EXPECT_EQ(*t.take_posted({1, 5}), "first");
  EXPECT_EQ(*t.take_posted({1, 5}), "second");
  EXPECT_FALSE(t.take_posted({1, 5}));
  EXPECT_EQ(*t.take_posted({2, 5}), "other peer");
}

TEST(MatchTable, UnexpectedArrivalsWaitForTheirReceive) {
  Table t;
  t.add_unexpected({3, 9}, 1);
  t.add_unexpected({3, 9}, 2);
  EXPECT_EQ(t.unexpected_count(), 2u);
  EXPECT_FALSE(t.take_unexpected({3, 8}));
  EXPECT_EQ(*t.take_unexpected({3, 9}), 1);
  EXPECT_EQ(*t.take_unexpected({3, 9}), 2);
  EXPECT_EQ(t.unexpected_count(), 0u);
}

TEST(MatchTable, RemovingATagRangeTakesOnlyItsArrivals) {
  Table t;
  t.add_unexpected({1, 4}, 40);
  t.add_unexpected({1, 5}, 50);
  t.add_unexpected({2, 6}, 60);
  t.add_unexpected({2, 7}, 70);
  std::vector<std::string> removed;
  t.remove_unexpected(5, 6, [&](int peer, uint64_t tag, int value) {
    removed.push_back(std::to_string(peer) + ":" + std::to_string(tag) + "=" +
                      std::to_string(value));
  });
  std::sort(removed.begin(), removed.end());  // peers in no particular order
  EXPECT_EQ(removed, (std::vector<std::string>{"1:5=50", "2:6=60"}));
  EXPECT_EQ(t.unexpected_count(), 2u);
  EXPECT_EQ(*t.take_unexpected({1, 4}), 40);
  EXPECT_EQ(*t.take_unexpected({2, 7}), 70);
}

TEST(MatchTable, FailPeerDrainsOnlyThatPeer) {
  Table t;
  t.add_posted({1, 1}, "a");
  t.add_posted({1, 2}, "b");
  t.add_posted({2, 1}, "c");
  std::vector<std::string> failed;
  t.fail_peer(1, [&](std::string& s) { failed.push_back(s); });
  EXPECT_EQ(failed.size(), 2u);
  EXPECT_EQ(t.posted_count(1), 0u);
  EXPECT_EQ(t.posted_count(2), 1u);
}

}  // namespace
}  // namespace ibcoll::transport
