// runtime/placement: the node identity and what a node's bindings say about oversubscription.
#include <gtest/gtest.h>
#include <unistd.h>

#include <climits>
#include <fstream>
#include <string>

#include "runtime/placement.h"

namespace ibcoll::runtime {
namespace {

topo::CpuSet cpus(const std::string& list) {
  return topo::CpuSet::from_list(list, "test");
}

TEST(Placement, TheNodeIsTheHostAndItsBootUnlessNamed) {
  char host[HOST_NAME_MAX + 1] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  ASSERT_GE(boot.size(), 8u);
  Config config;
  EXPECT_EQ(this_node(config), std::string(host) + "/" + boot.substr(0, 8));
  config.node = "rack3-node7";
  EXPECT_EQ(this_node(config), "rack3-node7");
}

TEST(Placement, RanksOutnumberingTheirCpusBetweenThemAreOversubscribed) {
  Placement placement;
  placement.node_ranks = {0, 2, 5};
  placement.node_bindings = {cpus("0"), cpus("1"), cpus("2")};
  EXPECT_EQ(placement.node_cpus(), 3);
  EXPECT_FALSE(placement.oversubscribed());
  EXPECT_EQ(placement.local_rank(5), 2);
  EXPECT_EQ(placement.local_rank(1), -1);
  // Three ranks bound to one core's two PUs (a cgroup cpuset of 2 on a 64-core machine).
  placement.node_bindings = {cpus("0-1"), cpus("0-1"), cpus("1")};
  EXPECT_EQ(placement.node_cpus(), 2);
  EXPECT_TRUE(placement.oversubscribed());
}

TEST(Placement, CpusOutsideAGivenTopologyCountAsAllOfIt) {
  Placement placement;
  placement.topology = topo::Topology::load("pack:1 core:2 pu:1");
  placement.cpus = cpus("1-5");
  EXPECT_EQ(placement.cpus_in_topology().to_list(), "1");
  placement.cpus = cpus("7-9");
  EXPECT_EQ(placement.cpus_in_topology().to_list(), "0-1");
}

}  // namespace
}  // namespace ibcoll::runtime
