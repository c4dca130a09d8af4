// topo/hierarchy: members arranged by node and package, as the hierarchical algorithms and
// rings use them, for block, round-robin and uneven layouts.
#include <gtest/gtest.h>

#include <vector>

#include "topo/hierarchy.h"

namespace ibcoll::topo {
namespace {

using Members = std::vector<int>;

TEST(Hierarchy, BlockLayoutGroupsConsecutiveMembers) {
  // 2 nodes x 3 ranks, numbered node by node (as mpirun --map-by node:block numbers them).
  const std::vector<MemberPlace> places = {{7, 0}, {7, 0}, {7, 1}, {9, 0}, {9, 1}, {9, 1}};
  const Hierarchy h(places);
  ASSERT_EQ(h.nodes().size(), 2u);
  EXPECT_EQ(h.nodes()[0], (Members{0, 1, 2}));
  EXPECT_EQ(h.nodes()[1], (Members{3, 4, 5}));
  EXPECT_EQ(h.leaders(), (Members{0, 3}));
  EXPECT_EQ(h.with_local_index(2), (Members{2, 5}));
  EXPECT_EQ(h.node_index(4), 1);
  EXPECT_EQ(h.local_index(4), 1);
  EXPECT_TRUE(h.spans_nodes());
  EXPECT_TRUE(h.balanced());
  EXPECT_EQ(h.ring_order(), (Members{0, 1, 2, 3, 4, 5}));
}

TEST(Hierarchy, RoundRobinLayoutRingsNodeByNode) {
  // 3 nodes, ranks dealt out in turn (srun --distribution=cyclic): a ring in rank order would
  // cross nodes at every hop; node-major it crosses 3 times.
  const std::vector<MemberPlace> places = {{1, 0}, {2, 0}, {3, 0}, {1, 0}, {2, 0}, {3, 0}};
  const Hierarchy h(places);
  EXPECT_EQ(h.nodes()[1], (Members{1, 4}));
  EXPECT_EQ(h.leaders(), (Members{0, 1, 2}));
  EXPECT_EQ(h.with_local_index(1), (Members{3, 4, 5}));
  EXPECT_EQ(h.ring_order(), (Members{0, 3, 1, 4, 2, 5}));
}

TEST(Hierarchy, InsideANodeTheRingKeepsPackagesTogether) {
  // One node, ranks bound round-robin over two packages; one rank spanning both (-1) goes last.
  const std::vector<MemberPlace> places = {{5, 0}, {5, 1}, {5, -1}, {5, 0}, {5, 1}};
  const Hierarchy h(places);
  EXPECT_FALSE(h.spans_nodes());
  EXPECT_EQ(h.ring_order(), (Members{0, 3, 1, 4, 2}));
}

TEST(Hierarchy, UnevenNodes) {
  const std::vector<MemberPlace> places = {{0, 0}, {0, 0}, {1, 0}};
  const Hierarchy h(places);
  EXPECT_FALSE(h.balanced());
  EXPECT_EQ(h.with_local_index(1), (Members{1}));
  EXPECT_EQ(h.with_local_index(2), (Members{}));
  EXPECT_EQ(h.leaders(), (Members{0, 2}));
}

}  // namespace
}  // namespace ibcoll::topo
