// The connection plan of virtual jobs (ibcoll_info --plan): the real algorithms, run for one
// rank at a time over a recording channel, and what they cost a process.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "runtime/connection_plan.h"

namespace ibcoll::runtime {
namespace {

using collectives::Collective;

ConnectionPlan plan(int nodes, int ranks_per_node, int exhaustive_up_to = 64) {
  PlanRequest request;
  request.nodes = nodes;
  request.ranks_per_node = ranks_per_node;
  request.exhaustive_up_to = exhaustive_up_to;
  return plan_connections(request);
}

// One size per kind of algorithm across nodes (the flat checked one, hierarchical, rails over a
// binomial bcast, rails over scatter_allgather): for the plans of every rank and root, which
// the sanitizer build runs too.
ConnectionPlan plan_every_kind(int nodes, int ranks_per_node, int exhaustive_up_to) {
  PlanRequest request;
  request.nodes = nodes;
  request.ranks_per_node = ranks_per_node;
  request.exhaustive_up_to = exhaustive_up_to;
  request.sizes = {8, 64 << 10, 512 << 10, 8 << 20};
  return plan_connections(request);
}

const CallPlan& call(const ConnectionPlan& p, Collective collective, size_t bytes) {
  for (const CallPlan& c : p.calls)
    if (c.collective == collective && c.bytes == bytes) return c;
  throw std::runtime_error("no such call planned");
}

int bound(int nodes, int ranks_per_node) {
  return 2 * static_cast<int>(std::ceil(std::log2(nodes))) + ranks_per_node;
}

// 4 nodes of 4: a checked 8-byte call is recursive doubling over all 16 ranks (partners rank
// xor 1, 2 on the node, xor 4, 8 on two other nodes), the bcast's too, as its own check.
TEST(ConnectionPlan, SmallCallsAreRecursiveDoublingOverTheWholeJob) {
  const ConnectionPlan p = plan(4, 4);
  EXPECT_EQ(p.ranks_planned.size(), 16u);  // every rank
  for (Collective collective : {Collective::allreduce, Collective::bcast}) {
    const CallPlan& c = call(p, collective, 8);
    EXPECT_STREQ(c.algorithm,
                 collective == Collective::allreduce ? "recursive_doubling" : "binomial");
    EXPECT_EQ(c.most.local, 2);
    EXPECT_EQ(c.most.remote, 2);
    EXPECT_EQ(c.most.remote_nodes, 2);
  }
  EXPECT_STREQ(call(p, Collective::allreduce, 64 << 10).algorithm, "hierarchical");
  EXPECT_STREQ(call(p, Collective::allreduce, 4 << 20).algorithm, "rails");
  EXPECT_EQ(p.rc_qps_all_remote, 12u);
}

// Shapes with nodes and ranks that are not powers of two, every rank and root: every call
// runs to its end, and no rank talks to more peers than the bound.
TEST(ConnectionPlan, EveryRankOfOddShapesStaysWithinTheBound) {
  for (auto [nodes, per_node] : {std::pair{3, 3}, {5, 2}, {16, 4}, {7, 1}}) {
    SCOPED_TRACE(std::to_string(nodes) + " x " + std::to_string(per_node));
    const ConnectionPlan p = plan_every_kind(nodes, per_node, nodes * per_node);
    EXPECT_EQ(p.ranks_planned.size(), static_cast<size_t>(nodes * per_node));
    EXPECT_LE(p.most.remote, bound(nodes, per_node));
    EXPECT_LE(p.most.remote_nodes, nodes - 1);
    EXPECT_LE(p.most.local, per_node - 1);
  }
}

// The targets at 1024 nodes of 64 ranks: remote peers within 2 log2(nodes) + ranks per
// node for every call and all together; XRC send QPs at most one per other node; verbs
// buffers the same as in a job of 64 nodes, and within 32 MiB; credits for each peer that sends.
TEST(ConnectionPlan, AtOneThousandNodesOfSixtyFourRanks) {
  const ConnectionPlan p = plan(1024, 64);
  EXPECT_EQ(p.ranks_planned.size(), 12u);  // a sample
  for (const CallPlan& c : p.calls)
    EXPECT_LE(c.most.remote, bound(1024, 64)) << c.algorithm << " " << c.bytes;
  EXPECT_LE(p.most.remote, bound(1024, 64));
  EXPECT_LE(p.xrc_send_qps, 1023u);
  EXPECT_EQ(p.rc_qps_all_remote, 65536u - 64u);
  EXPECT_EQ(p.rc_qps_on_demand, static_cast<size_t>(p.most.remote));
  EXPECT_GT(p.receive_bytes, 0u);
  EXPECT_LE(p.receive_bytes, size_t{32} << 20);
  EXPECT_EQ(p.receive_bytes, plan(64, 64).receive_bytes);
  // Lent by the peers that connect: shared by the whole job, each rank would get one credit.
  EXPECT_GE(p.credits_per_peer, 8u);
  const std::string text = describe(p);
  EXPECT_NE(text.find("1024 nodes x 64 ranks per node (65536 ranks"), std::string::npos) << text;
}

// The target for the shared segment: at 128 ranks per node, what the planned calls keep
// in memory stays within 512 MiB (the file is sparse, and far larger). It grows as ranks per
// node times the local peers each talks to, a few more with every doubling.
TEST(ConnectionPlan, TheSharedSegmentInUseAtOneHundredTwentyEightRanksPerNode) {
  const ConnectionPlan p64 = plan(4, 64), p128 = plan(4, 128);
  EXPECT_LE(p128.shared_in_use_bytes, size_t{512} << 20);
  EXPECT_GT(p128.shared_segment_bytes, p128.shared_in_use_bytes);
  EXPECT_LT(p128.shared_in_use_bytes, p64.shared_in_use_bytes * 5 / 2);
}

// The sample of a large job finds the most any rank needs: at 16 nodes of 8, every rank
// planned and 12 sampled agree.
TEST(ConnectionPlan, TheSampleFindsTheMostOfEveryRank) {
  const ConnectionPlan all = plan_every_kind(16, 8, 128);
  const ConnectionPlan sampled = plan_every_kind(16, 8, 1);
  EXPECT_EQ(all.ranks_planned.size(), 128u);
  EXPECT_EQ(sampled.ranks_planned.size(), 12u);
  EXPECT_EQ(sampled.most.remote, all.most.remote);
  EXPECT_EQ(sampled.most.remote_nodes, all.most.remote_nodes);
}

TEST(ConnectionPlan, BadShapesAreClearErrors) {
  for (auto [nodes, per_node, expect] :
       {std::tuple{0, 4, "nodes"}, {4, 0, "ranks per node"}, {1 << 13, 1 << 12, "at most 2^24"}}) {
    try {
      plan(nodes, per_node);
      ADD_FAILURE() << "accepted " << nodes << " x " << per_node;
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(expect), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace ibcoll::runtime
