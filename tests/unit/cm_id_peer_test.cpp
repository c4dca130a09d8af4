// The peer an rdma_cm id stands for, kept in its context pointer: peer 0 is a peer like any
// other (its failures used to go unreported: its context was null, read as "no peer").
#include <gtest/gtest.h>

#include "transport/verbs/cm_id_peer.h"

namespace ibcoll::transport::verbs {
namespace {

TEST(CmIdPeer, EveryPeerRoundTripsAndNullIsNone) {
  for (int peer : {0, 1, 7, 65535})
    EXPECT_EQ(cm_peer_of(cm_context_of(peer)), peer);
  EXPECT_NE(cm_context_of(0), nullptr);
  EXPECT_EQ(cm_peer_of(nullptr), -1);
}

}  // namespace
}  // namespace ibcoll::transport::verbs
