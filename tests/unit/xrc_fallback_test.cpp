// IBCOLL_XRC=auto on a job where XRC opened on some ranks only: every rank sees the same
// addresses and names the same ranks to fall back for, so the whole job turns to RC together
// (runtime/verbs_endpoint.h); where all agree, nobody turns.
#include <gtest/gtest.h>

#include <vector>

#include "runtime/verbs_endpoint.h"

namespace ibcoll::runtime {
namespace {

std::vector<transport::verbs::EndpointAddress> addresses(std::vector<uint8_t> xrc) {
  std::vector<transport::verbs::EndpointAddress> all(xrc.size());
  for (size_t r = 0; r < xrc.size(); ++r)
    all[r].xrc = xrc[r];
  return all;
}

TEST(XrcFallback, RanksWithoutXrcAmongRanksWithIt) {
  EXPECT_EQ(ranks_to_fall_back_for(addresses({1, 0, 1, 0})), (std::vector<int>{1, 3}));
  EXPECT_EQ(ranks_to_fall_back_for(addresses({0, 1})), (std::vector<int>{0}));
}

TEST(XrcFallback, NoneWhereAllAgree) {
  EXPECT_TRUE(ranks_to_fall_back_for(addresses({1, 1, 1})).empty());
  EXPECT_TRUE(ranks_to_fall_back_for(addresses({0, 0, 0})).empty());
}

}  // namespace
}  // namespace ibcoll::runtime
