#include "topo/cpu_set.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <new>
#include <utility>

#include "base/status.h"

namespace ibcoll::topo {
namespace {

hwloc_bitmap_t allocated() {
  hwloc_bitmap_t bitmap = hwloc_bitmap_alloc();
  if (!bitmap) throw std::bad_alloc();
  return bitmap;
}

}  // namespace

CpuSet::CpuSet() : bitmap_(allocated()) {}

CpuSet::~CpuSet() {
  if (bitmap_) hwloc_bitmap_free(bitmap_);
}

CpuSet::CpuSet(const CpuSet& other) : bitmap_(hwloc_bitmap_dup(other.bitmap_)) {
  if (!bitmap_) throw std::bad_alloc();
}

CpuSet& CpuSet::operator=(const CpuSet& other) {
  if (this != &other && hwloc_bitmap_copy(bitmap_, other.bitmap_) != 0) throw std::bad_alloc();
  return *this;
}

CpuSet::CpuSet(CpuSet&& other) noexcept : bitmap_(std::exchange(other.bitmap_, nullptr)) {}

CpuSet& CpuSet::operator=(CpuSet&& other) noexcept {
  std::swap(bitmap_, other.bitmap_);
  return *this;
}

CpuSet CpuSet::from_list(const std::string& list, const std::string& what) {
  CpuSet set;
  // hwloc's parser accepts some junk silently ("3-" as 3 to infinity): check the characters and
  // that the set is finite. A bitmap as long as its largest number is allocated: no number may
  // pass kMostCpus.
  const bool plain = list.find_first_not_of("0123456789,-") == std::string::npos;
  bool small = true;
  for (size_t at = list.find_first_of("0123456789"); small && at != std::string::npos;) {
    const size_t end = std::min(list.find_first_not_of("0123456789", at), list.size());
    small = end - at <= 7 && std::stoul(list.substr(at, end - at)) < kMostCpus;
    at = list.find_first_of("0123456789", end);
  }
  if (list.empty() || !plain || !small ||
      hwloc_bitmap_list_sscanf(set.bitmap_, list.c_str()) != 0 ||
      hwloc_bitmap_weight(set.bitmap_) < 0) {
    throw Error(Code::invalid_argument,
                what + ": '" + list + "' is not a list of processing units (e.g. 0-3,8)");
  }
  return set;
}

CpuSet CpuSet::of_this_process() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) throw_errno("sched_getaffinity", errno);
  CpuSet set;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &mask)) hwloc_bitmap_set(set.bitmap_, static_cast<unsigned>(cpu));
  return set;
}

CpuSet CpuSet::copy_of(const hwloc_bitmap_s* bitmap) {
  CpuSet set;
  if (bitmap && hwloc_bitmap_copy(set.bitmap_, bitmap) != 0) throw std::bad_alloc();
  return set;
}

std::string CpuSet::to_list() const {
  char* text = nullptr;
  if (hwloc_bitmap_list_asprintf(&text, bitmap_) < 0 || !text) throw std::bad_alloc();
  std::string list(text);
  std::free(text);
  return list;
}

int CpuSet::count() const {
  return hwloc_bitmap_weight(bitmap_);
}

bool CpuSet::includes(const CpuSet& other) const {
  return hwloc_bitmap_isincluded(other.bitmap_, bitmap_) != 0;
}

CpuSet CpuSet::united_with(const CpuSet& other) const {
  CpuSet set;
  hwloc_bitmap_or(set.bitmap_, bitmap_, other.bitmap_);
  return set;
}

CpuSet CpuSet::intersected_with(const CpuSet& other) const {
  CpuSet set;
  hwloc_bitmap_and(set.bitmap_, bitmap_, other.bitmap_);
  return set;
}

bool CpuSet::operator==(const CpuSet& other) const {
  return hwloc_bitmap_isequal(bitmap_, other.bitmap_) != 0;
}

}  // namespace ibcoll::topo
