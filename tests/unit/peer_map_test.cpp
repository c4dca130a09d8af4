// PeerMap keeps entries only for the peers used, by job rank, at stable addresses.
#include <gtest/gtest.h>

#include <set>

#include "transport/peer_map.h"

namespace ibcoll::transport {
namespace {

TEST(PeerMap, EntriesAreMadeOnUseAndStayPut) {
  PeerMap<int> map;
  EXPECT_EQ(map.find(65535), nullptr);
  int& far = map[65535];
  EXPECT_EQ(far, 0);  // value-initialised
  far = 7;
  for (int peer = 0; peer < 1000; ++peer)
    map[peer * 3] = peer;  // rehashes: the first entry must not move
  EXPECT_EQ(&map[65535], &far);
  EXPECT_EQ(*map.find(65535), 7);
  EXPECT_EQ(map.find(1), nullptr);
  EXPECT_EQ(*map.find(2997), 999);
  EXPECT_EQ(map.size(), 1001u);
}

TEST(PeerMap, VisitsOnlyItsEntries) {
  PeerMap<int> map;
  map[5] = 50;
  map[1 << 20] = 1;
  (void)map.find(9);  // finding makes nothing
  std::set<int> seen;
  map.for_each([&](int peer, int& value) {
    seen.insert(peer);
    ++value;
  });
  EXPECT_EQ(seen, (std::set<int>{5, 1 << 20}));
  EXPECT_EQ(map[5], 51);
  const PeerMap<int>& read_only = map;
  int sum = 0;
  read_only.for_each([&](int, const int& value) { sum += value; });
  EXPECT_EQ(sum, 53);
}

}  // namespace
}  // namespace ibcoll::transport
