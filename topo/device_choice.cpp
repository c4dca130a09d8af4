#include "topo/device_choice.h"

namespace ibcoll::topo {

DeviceChoice choose_device(const Topology& topology, const std::vector<std::string>& active,
                           const CpuSet& binding, int local_rank) {
  const std::vector<NetworkDevice> known = topology.network_devices();
  std::vector<const std::string*> nearest;
  int best = -1;
  for (const std::string& name : active) {
    CpuSet locality = topology.all_cpus();
    for (const NetworkDevice& device : known)
      if (device.name == name) locality = device.locality;
    const int depth = topology.depth_holding(binding.united_with(locality));
    if (depth > best) nearest.clear();
    if (depth >= best) {
      best = depth;
      nearest.push_back(&name);
    }
  }
  if (nearest.empty()) return {"", 0};
  const auto turn = static_cast<size_t>(local_rank < 0 ? 0 : local_rank) % nearest.size();
  return {*nearest[turn], static_cast<int>(nearest.size())};
}

}  // namespace ibcoll::topo
