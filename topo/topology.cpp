#include "topo/topology.h"

#include <hwloc.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "base/status.h"

namespace ibcoll::topo {
namespace {

hwloc_obj_type_t type_named(const char* kind) {
  if (std::strcmp(kind, "package") == 0) return HWLOC_OBJ_PACKAGE;
  if (std::strcmp(kind, "numa") == 0) return HWLOC_OBJ_NUMANODE;
  if (std::strcmp(kind, "core") == 0) return HWLOC_OBJ_CORE;
  if (std::strcmp(kind, "pu") == 0) return HWLOC_OBJ_PU;
  throw Error(Code::internal, std::string("no topology object kind '") + kind + "'");
}

std::string plural(int n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

Topology Topology::load(const std::string& source) {
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) throw_errno("hwloc_topology_init", errno);
  Topology owner(topology, source.empty());  // destroys it if anything below throws
  // OpenFabrics OS devices need the I/O objects, which hwloc leaves out by default. Linux's
  // sysfs gives them and their PCI devices; the I/O plugins would only add cost and side
  // effects in every rank: libpciaccess (the same PCI devices) leaves its name cache allocated
  // for good (600 KB, LeakSanitizer), OpenCL loads the GPU drivers' ICDs, GL opens X displays;
  // with them, LeakSanitizer's exit check failed in ranks under mpirun (hwloc 2.9).
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  for (const char* plugin : {"pci", "opencl", "gl", "cuda", "nvml", "rsmi", "levelzero"})
    hwloc_topology_set_components(topology, HWLOC_TOPOLOGY_COMPONENTS_FLAG_BLACKLIST, plugin);
  int rc = 0;
  const char* how = "";
  if (!source.empty() && access(source.c_str(), R_OK) == 0) {
    rc = hwloc_topology_set_xml(topology, source.c_str());
    how = "as an XML file";
  } else if (!source.empty()) {
    rc = hwloc_topology_set_synthetic(topology, source.c_str());
    how = "as a synthetic description (and it is no readable file)";
  }
  if (rc == 0) rc = hwloc_topology_load(topology);
  if (rc != 0 && source.empty()) throw_errno("hwloc_topology_load", errno);
  if (rc != 0) {
    throw Error(Code::invalid_argument, "IBCOLL_TOPOLOGY: cannot load '" + source + "' " + how);
  }
  return owner;
}

Topology::Topology(hwloc_topology* topology, bool this_machine)
    : topology_(topology), this_machine_(this_machine) {}

Topology::Topology(Topology&& other) noexcept
    : topology_(std::exchange(other.topology_, nullptr)), this_machine_(other.this_machine_) {}

Topology& Topology::operator=(Topology&& other) noexcept {
  std::swap(topology_, other.topology_);
  this_machine_ = other.this_machine_;
  return *this;
}

Topology::~Topology() {
  if (topology_) hwloc_topology_destroy(topology_);
}

CpuSet Topology::all_cpus() const {
  return CpuSet::copy_of(hwloc_topology_get_topology_cpuset(topology_));
}

int Topology::count(const char* kind) const {
  return hwloc_get_nbobjs_by_type(topology_, type_named(kind));
}

Place Topology::place_of(const CpuSet& cpus) const {
  auto holder = [&](const char* kind) {
    if (cpus.empty()) return -1;
    const hwloc_obj_type_t type = type_named(kind);
    for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topology_, type, nullptr); o;
         o = hwloc_get_next_obj_by_type(topology_, type, o)) {
      if (hwloc_bitmap_isincluded(cpus.bitmap(), o->cpuset))
        return static_cast<int>(o->logical_index);
    }
    return -1;
  };
  return {holder("package"), holder("numa"), holder("core")};
}

std::vector<NetworkDevice> Topology::network_devices() const {
  std::vector<NetworkDevice> devices;
  for (hwloc_obj_t o = hwloc_get_next_osdev(topology_, nullptr); o;
       o = hwloc_get_next_osdev(topology_, o)) {
    if (o->attr->osdev.type != HWLOC_OBJ_OSDEV_OPENFABRICS || !o->name) continue;
    const hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(topology_, o);
    devices.push_back({o->name, near ? CpuSet::copy_of(near->cpuset) : all_cpus()});
  }
  return devices;
}

std::vector<CpuSet> Topology::cores_of(const CpuSet& cpus) const {
  std::vector<CpuSet> cores;
  for (hwloc_obj_t o = hwloc_get_next_obj_by_type(topology_, HWLOC_OBJ_CORE, nullptr); o;
       o = hwloc_get_next_obj_by_type(topology_, HWLOC_OBJ_CORE, o)) {
    if (hwloc_bitmap_intersects(o->cpuset, cpus.bitmap()))
      cores.push_back(CpuSet::copy_of(o->cpuset));
  }
  return cores;
}

int Topology::depth_holding(const CpuSet& cpus) const {
  if (cpus.empty()) return 0;
  const hwloc_obj_t o = hwloc_get_obj_covering_cpuset(topology_, cpus.bitmap());
  return o ? o->depth : 0;
}

std::string Topology::summary() const {
  return plural(count("package"), "package", "packages") + ", " +
         plural(count("numa"), "NUMA node", "NUMA nodes") + ", " +
         plural(count("core"), "core", "cores") + ", " + plural(count("pu"), "PU", "PUs");
}

}  // namespace ibcoll::topo
