// Which verbs device a rank uses when IBCOLL_DEVICE is unset: of the active devices, the ones
// nearest its binding (the deepest topology object holding both its cpus and the device's);
// among equally near ones, local ranks take turns so that they spread over them.
#pragma once

#include <string>
#include <vector>

#include "topo/cpu_set.h"
#include "topo/topology.h"

namespace ibcoll::topo {

struct DeviceChoice {
  std::string name;  // empty when `active` is
  int equally_near;  // how many devices were as near (the rank took turns among them)
};

// `active`: the names of the devices with an active port, in the order the verbs library lists
// them. A device hwloc does not know (Soft-RoCE has no PCI locality) is as near as the machine.
DeviceChoice choose_device(const Topology& topology, const std::vector<std::string>& active,
                           const CpuSet& binding, int local_rank);

}  // namespace ibcoll::topo
