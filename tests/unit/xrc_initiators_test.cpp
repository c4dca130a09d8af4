// XrcInitiators, the XRC handshake's order of asking, without a device (Soft-RoCE has no XRC):
// one INI per remote port whatever the number of peers there; only its creator is asked until
// the creator's TGT connects it, then the waiting peers are, naming that TGT; a creator that
// fails hands over to the next peer waiting; an INI every peer left is gone, and the port gets
// a new one, as it does when a peer's node refuses the INI's TGT.
#include <gtest/gtest.h>

#include <vector>

#include "transport/verbs/xrc_initiators.h"

namespace ibcoll::transport::verbs {
namespace {

PortAddress roce_port(uint8_t host) {
  PortAddress port;
  port.global = 1;
  port.gid[10] = port.gid[11] = 0xff;
  port.gid[15] = host;
  return port;
}

TEST(XrcInitiators, OnePerPortAndOnlyItsCreatorIsAskedFirst) {
  XrcInitiators table;
  const auto first = table.join(10, roce_port(1));
  EXPECT_TRUE(first.created);
  EXPECT_TRUE(first.ask_now);
  for (int peer : {11, 12}) {
    const auto joined = table.join(peer, roce_port(1));
    EXPECT_EQ(joined.initiator, first.initiator);
    EXPECT_FALSE(joined.created);
    EXPECT_FALSE(joined.ask_now) << "peer " << peer << " asked before the INI has its TGT";
  }
  const auto other = table.join(20, roce_port(2));
  EXPECT_TRUE(other.created);
  EXPECT_NE(other.initiator, first.initiator);
  EXPECT_EQ(table.size(), 2u);

  std::vector<int> ask;
  EXPECT_FALSE(table.connect(*first.initiator, 11, 77, ask)) << "a waiting peer is no creator";
  EXPECT_TRUE(ask.empty());
  ASSERT_TRUE(table.connect(*first.initiator, 10, 77, ask));
  EXPECT_EQ(ask, (std::vector<int>{11, 12}));
  EXPECT_EQ(first.initiator->target_qp_num, 77u);
  EXPECT_FALSE(table.connect(*first.initiator, 10, 78, ask)) << "connected twice";

  const auto late = table.join(13, roce_port(1));
  EXPECT_FALSE(late.created);
  EXPECT_TRUE(late.ask_now) << "the INI is connected: a new peer there is asked at once";
  EXPECT_EQ(table.size(), 2u);
}

TEST(XrcInitiators, ACreatorThatFailsHandsOverToTheNextPeerWaiting) {
  XrcInitiators table;
  XrcInitiators::Initiator& ini = *table.join(10, roce_port(1)).initiator;
  table.join(11, roce_port(1));
  table.join(12, roce_port(1));
  EXPECT_EQ(table.leave(10, ini).next_creator, 11);
  EXPECT_EQ(ini.creator, 11);
  EXPECT_EQ(ini.waiting, (std::vector<int>{12}));
  std::vector<int> ask;
  EXPECT_FALSE(table.connect(ini, 10, 50, ask)) << "the failed creator's late answer";
  ASSERT_TRUE(table.connect(ini, 11, 51, ask));
  EXPECT_EQ(ask, (std::vector<int>{12}));
}

TEST(XrcInitiators, AWaitingPeerThatFailsIsNotAsked) {
  XrcInitiators table;
  XrcInitiators::Initiator& ini = *table.join(10, roce_port(1)).initiator;
  table.join(11, roce_port(1));
  table.join(12, roce_port(1));
  EXPECT_EQ(table.leave(11, ini).next_creator, -1);
  std::vector<int> ask;
  ASSERT_TRUE(table.connect(ini, 10, 5, ask));
  EXPECT_EQ(ask, (std::vector<int>{12}));
}

TEST(XrcInitiators, APortEveryPeerLeftGetsANewInitiator) {
  XrcInitiators table;
  XrcInitiators::Initiator* ini = table.join(10, roce_port(1)).initiator;
  table.join(11, roce_port(1));
  std::vector<int> ask;
  ASSERT_TRUE(table.connect(*ini, 10, 5, ask));
  EXPECT_EQ(table.leave(10, *ini).next_creator, -1) << "connected: no creator is needed any more";
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(table.leave(11, *ini).next_creator, -1);
  EXPECT_EQ(table.size(), 0u);
  const auto again = table.join(12, roce_port(1));
  EXPECT_TRUE(again.created);
  EXPECT_TRUE(again.ask_now);
  EXPECT_FALSE(again.initiator->connected);
}

// Peers 12 and 13 join a connected INI whose TGT's holders (10, 11) have exited on their node,
// before this process has noticed: their node refuses the TGT, so each abandons the INI. The
// first to do so becomes the creator of the port's new INI and the second waits for it; the
// old INI stays with its last peers until they leave.
TEST(XrcInitiators, APeerWhoseNodeRefusedTheTgtMakesANewInitiator) {
  XrcInitiators table;
  XrcInitiators::Initiator* old = table.join(10, roce_port(1)).initiator;
  std::vector<int> ask;
  ASSERT_TRUE(table.connect(*old, 10, 5, ask));
  table.join(11, roce_port(1));
  for (int peer : {12, 13})
    EXPECT_TRUE(table.join(peer, roce_port(1)).ask_now) << "connected: asked at once";

  EXPECT_EQ(table.abandon(12, *old).next_creator, -1);
  const auto renewed = table.join(12, roce_port(1));
  EXPECT_TRUE(renewed.created) << "the port kept the INI whose TGT is gone";
  EXPECT_TRUE(renewed.ask_now);
  EXPECT_NE(renewed.initiator, old);
  EXPECT_EQ(table.size(), 2u);  // the old one still has 10, 11 and 13

  table.abandon(13, *old);
  const auto waiting = table.join(13, roce_port(1));
  EXPECT_EQ(waiting.initiator, renewed.initiator);
  EXPECT_FALSE(waiting.ask_now) << "asked before the new INI's creator answered";

  table.leave(10, *old);
  EXPECT_EQ(table.size(), 2u);
  table.leave(11, *old);
  EXPECT_EQ(table.size(), 1u) << "the abandoned INI outlived its last peer";
  ASSERT_TRUE(table.connect(*renewed.initiator, 12, 9, ask));
  EXPECT_EQ(ask, std::vector<int>{13});
  EXPECT_EQ(table.join(14, roce_port(1)).initiator, renewed.initiator);
}

// A creator whose INI could not be made leaves at once: the port is free for the next try.
TEST(XrcInitiators, AJoinUndoneLeavesThePortFree) {
  XrcInitiators table;
  const auto first = table.join(10, roce_port(1));
  ASSERT_TRUE(first.created);
  const XrcInitiators::Left left = table.leave(10, *first.initiator);
  EXPECT_EQ(left.next_creator, -1);
  EXPECT_EQ(left.retired, nullptr) << "no QP was made: nothing to retire";
  EXPECT_EQ(table.size(), 0u);
  EXPECT_TRUE(table.join(11, roce_port(1)).created);
}

// InfiniBand ports differ by LID (the GID prefix is the subnet's), RoCE ports by GID.
TEST(XrcInitiators, PortsAreTheirGidAndLid) {
  PortAddress ib_a, ib_b;
  ib_a.lid = 3;
  ib_b.lid = 4;
  EXPECT_NE(XrcInitiators::key_of(ib_a), XrcInitiators::key_of(ib_b));
  EXPECT_NE(XrcInitiators::key_of(roce_port(1)), XrcInitiators::key_of(roce_port(2)));
  EXPECT_EQ(XrcInitiators::key_of(roce_port(1)), XrcInitiators::key_of(roce_port(1)));
  XrcInitiators table;
  table.join(1, ib_a);
  table.join(2, ib_b);
  table.join(3, ib_a);
  EXPECT_EQ(table.size(), 2u);
}

}  // namespace
}  // namespace ibcoll::transport::verbs
