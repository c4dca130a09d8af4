// MatchTable: FIFO per (peer, tag), unexpected arrivals kept, failures drain one peer only.
#include <gtest/gtest.h>

#include <string>

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
