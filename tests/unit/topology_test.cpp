// topo/: topologies loaded from synthetic descriptions and from an XML file with RDMA devices
// (tests/unit/data/two_packages_three_hcas.xml: 2 packages of 2 cores of 2 PUs, PUs 0-3 and
// 4-7; mlx5_0 and mlx5_1 on package 0's PCI bus, mlx5_2 on package 1's), and the device each
// binding chooses.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "base/status.h"
#include "topo/cpu_set.h"
#include "topo/device_choice.h"
#include "topo/topology.h"

namespace ibcoll::topo {
namespace {

const std::string kThreeHcas = IBCOLL_TEST_DATA "/two_packages_three_hcas.xml";

CpuSet cpus(const std::string& list) {
  return CpuSet::from_list(list, "test");
}

TEST(CpuSet, ParsesAndPrintsListsAndRejectsJunkNamingTheArgument) {
  EXPECT_EQ(cpus("0-3,8").to_list(), "0-3,8");
  EXPECT_EQ(cpus("0-3,8").count(), 5);
  EXPECT_TRUE(cpus("0-7").includes(cpus("2-3")));
  EXPECT_FALSE(cpus("2-3").includes(cpus("0-7")));
  EXPECT_EQ(cpus("0-1").united_with(cpus("4")).to_list(), "0-1,4");
  EXPECT_EQ(cpus("0-5").intersected_with(cpus("4-9")).to_list(), "4-5");
  for (const char* junk : {"", "3-", "a", "0x3", "1 2", "0-1048576", "99999999999999999999"}) {
    try {
      CpuSet::from_list(junk, "IBCOLL_SOMETHING");
      ADD_FAILURE() << "accepted '" << junk << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::invalid_argument);
      EXPECT_NE(std::string(e.what()).find("IBCOLL_SOMETHING"), std::string::npos) << e.what();
    }
  }
}

TEST(Topology, SyntheticDescriptionCountsAndPlaces) {
  const Topology t = Topology::load("pack:2 numa:1 core:4 pu:2");
  EXPECT_FALSE(t.is_this_machine());
  EXPECT_EQ(t.summary(), "2 packages, 2 NUMA nodes, 8 cores, 16 PUs");
  EXPECT_EQ(t.all_cpus().to_list(), "0-15");
  const Place one_pu = t.place_of(cpus("11"));
  EXPECT_EQ(one_pu.package, 1);
  EXPECT_EQ(one_pu.numa, 1);
  EXPECT_EQ(one_pu.core, 5);
  const Place one_package = t.place_of(cpus("0-7"));
  EXPECT_EQ(one_package.package, 0);
  EXPECT_EQ(one_package.core, -1);
  const Place both = t.place_of(cpus("7-8"));
  EXPECT_EQ(both.package, -1);
  EXPECT_EQ(both.numa, -1);
  EXPECT_EQ(t.cores_of(cpus("3-6")).size(), 3u);  // cores 1, 2 and 3
  EXPECT_TRUE(t.network_devices().empty());       // synthetic topologies have no I/O
}

TEST(Topology, ThisMachineLoadsAndHoldsThisProcess) {
  const Topology t = Topology::load("");
  EXPECT_TRUE(t.is_this_machine());
  EXPECT_GE(t.count("pu"), 1);
  EXPECT_TRUE(t.all_cpus().includes(CpuSet::of_this_process()));
}

TEST(Topology, UnloadableSourceIsAnInvalidArgumentNamingTheVariable) {
  try {
    Topology::load("pack:two");
    FAIL() << "loaded a broken description";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("IBCOLL_TOPOLOGY"), std::string::npos) << e.what();
  }
}

TEST(Topology, XmlDevicesCarryTheirPackagesCpus) {
  const Topology t = Topology::load(kThreeHcas);
  const std::vector<NetworkDevice> devices = t.network_devices();
  ASSERT_EQ(devices.size(), 3u);
  EXPECT_EQ(devices[0].name, "mlx5_0");
  EXPECT_EQ(devices[0].locality.to_list(), "0-3");
  EXPECT_EQ(devices[1].locality.to_list(), "0-3");
  EXPECT_EQ(devices[2].name, "mlx5_2");
  EXPECT_EQ(devices[2].locality.to_list(), "4-7");
}

TEST(DeviceChoice, ARankTakesTheDeviceOnItsOwnPackage) {
  const Topology t = Topology::load(kThreeHcas);
  const std::vector<std::string> active = {"mlx5_0", "mlx5_1", "mlx5_2"};
  for (int local_rank = 0; local_rank < 4; ++local_rank) {
    const DeviceChoice choice = choose_device(t, active, cpus("5"), local_rank);
    EXPECT_EQ(choice.name, "mlx5_2");
    EXPECT_EQ(choice.equally_near, 1);
  }
}

TEST(DeviceChoice, LocalRanksSpreadOverEquallyNearDevices) {
  const Topology t = Topology::load(kThreeHcas);
  const std::vector<std::string> active = {"mlx5_0", "mlx5_1", "mlx5_2"};
  EXPECT_EQ(choose_device(t, active, cpus("0"), 0).name, "mlx5_0");
  EXPECT_EQ(choose_device(t, active, cpus("1"), 1).name, "mlx5_1");
  EXPECT_EQ(choose_device(t, active, cpus("2"), 2).name, "mlx5_0");
  EXPECT_EQ(choose_device(t, active, cpus("2"), 2).equally_near, 2);
}

TEST(DeviceChoice, OnlyActiveDevicesAreChosen) {
  const Topology t = Topology::load(kThreeHcas);
  // mlx5_2's port is down: a rank on package 1 goes to package 0's devices, spreading.
  EXPECT_EQ(choose_device(t, {"mlx5_0", "mlx5_1"}, cpus("6"), 0).name, "mlx5_0");
  EXPECT_EQ(choose_device(t, {"mlx5_0", "mlx5_1"}, cpus("6"), 1).name, "mlx5_1");
  EXPECT_EQ(choose_device(t, {}, cpus("6"), 0).name, "");
}

TEST(DeviceChoice, AnUnboundRankAndAnUnknownDeviceAreAsNearAsTheMachine) {
  const Topology t = Topology::load(kThreeHcas);
  // Bound to everything: every device is as near; local ranks take turns.
  EXPECT_EQ(choose_device(t, {"mlx5_0", "mlx5_2"}, cpus("0-7"), 1).name, "mlx5_2");
  // rxe0 has no PCI locality: a device hwloc knows near the rank is preferred over it...
  EXPECT_EQ(choose_device(t, {"rxe0", "mlx5_2"}, cpus("4"), 0).name, "mlx5_2");
  // ...and one hwloc knows far from it is as near as rxe0.
  EXPECT_EQ(choose_device(t, {"rxe0", "mlx5_2"}, cpus("0"), 0).equally_near, 2);
}

}  // namespace
}  // namespace ibcoll::topo
