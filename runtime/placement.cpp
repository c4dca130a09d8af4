#include "runtime/placement.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <map>

#include "base/status.h"
#include "runtime/bootstrap/set_up_exchange.h"
#include "runtime/set_up_records.h"

namespace ibcoll::runtime {

std::string this_node(const Config& config) {
  if (!config.node.empty()) return config.node;
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) throw_errno("gethostname", errno);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return boot.empty() ? host : std::string(host) + "/" + boot.substr(0, 8);
}

int Placement::local_rank(int rank) const {
  for (size_t i = 0; i < node_ranks.size(); ++i)
    if (node_ranks[i] == rank) return static_cast<int>(i);
  return -1;
}

int Placement::node_cpus() const {
  topo::CpuSet all;
  for (const topo::CpuSet& binding : node_bindings)
    all = all.united_with(binding);
  return all.count();
}

std::vector<topo::MemberPlace> Placement::places_of(const std::vector<int>& ranks) const {
  std::vector<topo::MemberPlace> chosen;
  chosen.reserve(ranks.size());
  for (int r : ranks)
    chosen.push_back(places[static_cast<size_t>(r)]);
  return chosen;
}

topo::CpuSet Placement::cpus_in_topology() const {
  topo::CpuSet known = cpus.intersected_with(topology->all_cpus());
  return known.empty() ? topology->all_cpus() : known;
}

Placement exchange_placement(Bootstrap& bootstrap, const Config& config) {
  Placement mine;
  // A node name is one line (Config checks IBCOLL_NODE).
  const std::vector<std::string> all = exchange_set_up(bootstrap, "placement", [&] {
    mine.node = this_node(config);
    mine.cpus = topo::CpuSet::of_this_process();
    mine.topology = topo::Topology::load(config.topology);
    const int package = mine.topology->place_of(mine.cpus_in_topology()).package;
    return place_record({mine.node, mine.cpus.to_list(), package});
  });
  std::map<std::string, int> node_numbers;
  mine.places.resize(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    const PlaceRecord place = read_place_record(all[r], static_cast<int>(r));
    const int number =
        node_numbers.try_emplace(place.node, static_cast<int>(node_numbers.size())).first->second;
    mine.places[r] = {number, place.package};
    if (place.node != mine.node) continue;
    mine.node_ranks.push_back(static_cast<int>(r));
    mine.node_bindings.push_back(
        topo::CpuSet::from_list(place.cpus, "rank " + std::to_string(r) + "'s placement"));
  }
  return mine;
}

}  // namespace ibcoll::runtime
