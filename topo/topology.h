// Topology: one node's hardware as hwloc sees it (packages, NUMA nodes, cores, processing units,
// and the OpenFabrics devices with the cpus nearest each), owning the hwloc topology. Loaded from
// this machine, or for tests and what-if runs from an XML file or a synthetic description
// (IBCOLL_TOPOLOGY).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "topo/cpu_set.h"

struct hwloc_topology;

namespace ibcoll::topo {

// Where a set of cpus sits: the logical index of the package, NUMA node and core that hold all
// of it, or -1 where it spans several (a rank bound to two packages has no package).
struct Place {
  int package = -1;
  int numa = -1;
  int core = -1;
};

// An RDMA device hwloc found (an OpenFabrics OS device), by its verbs name, and the cpus of the
// nearest non-I/O object (its PCI bus's package or NUMA node; the whole machine when unknown).
struct NetworkDevice {
  std::string name;
  CpuSet locality;
};

class Topology {
 public:
  // source: empty for this machine; else the path of an hwloc XML file (when it names a file)
  // or a synthetic description ("pack:2 core:4 pu:2"). Throws Error(invalid_argument) naming
  // IBCOLL_TOPOLOGY when the source cannot be loaded.
  static Topology load(const std::string& source);

  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  ~Topology();

  bool is_this_machine() const { return this_machine_; }
  CpuSet all_cpus() const;
  int count(const char* kind) const;  // "package", "numa", "core" or "pu"
  Place place_of(const CpuSet& cpus) const;
  std::vector<NetworkDevice> network_devices() const;
  // The cores that `cpus` touches, each as all of its PUs, in order.
  std::vector<CpuSet> cores_of(const CpuSet& cpus) const;
  // Depth of the deepest object holding all of `cpus` (0: the machine); deeper is nearer.
  int depth_holding(const CpuSet& cpus) const;
  // "2 packages, 2 NUMA nodes, 8 cores, 16 PUs".
  std::string summary() const;

 private:
  Topology(hwloc_topology* topology, bool this_machine);

  hwloc_topology* topology_;
  bool this_machine_;
};

}  // namespace ibcoll::topo
