// CpuSet: a set of processing units (hwloc's OS indices), owning its hwloc bitmap. A rank's
// binding, an object's cpus and a device's locality are all CpuSets.
#pragma once

#include <string>

struct hwloc_bitmap_s;

namespace ibcoll::topo {

class CpuSet {
 public:
  static constexpr unsigned long kMostCpus = 1 << 20;  // processing unit numbers stay below

  CpuSet();  // empty
  ~CpuSet();
  CpuSet(const CpuSet& other);
  CpuSet& operator=(const CpuSet& other);
  CpuSet(CpuSet&& other) noexcept;
  CpuSet& operator=(CpuSet&& other) noexcept;

  // "0-3,8": hwloc's list syntax, as taskset -c and cpuset cgroups write it. Throws
  // Error(invalid_argument) naming `what` on text that is not one.
  static CpuSet from_list(const std::string& list, const std::string& what);
  // Where this process may run: its affinity, which a cgroup's cpuset also limits.
  static CpuSet of_this_process();
  // Copies an hwloc bitmap (an object's cpuset).
  static CpuSet copy_of(const hwloc_bitmap_s* bitmap);

  std::string to_list() const;
  int count() const;  // PUs in the set
  bool empty() const { return count() == 0; }
  bool includes(const CpuSet& other) const;  // other ⊆ this
  CpuSet united_with(const CpuSet& other) const;
  CpuSet intersected_with(const CpuSet& other) const;
  bool operator==(const CpuSet& other) const;

  const hwloc_bitmap_s* bitmap() const { return bitmap_; }

 private:
  hwloc_bitmap_s* bitmap_;
};

}  // namespace ibcoll::topo
