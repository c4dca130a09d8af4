#include "topo/hierarchy.h"

#include <algorithm>
#include <climits>
#include <map>

namespace ibcoll::topo {

Hierarchy::Hierarchy(std::span<const MemberPlace> members)
    : node_index_(members.size()), local_index_(members.size()), package_(members.size()) {
  std::map<int, int> index_of_node;  // MemberPlace::node → index in nodes_
  for (size_t m = 0; m < members.size(); ++m) {
    const auto [entry, added] =
        index_of_node.try_emplace(members[m].node, static_cast<int>(nodes_.size()));
    if (added) nodes_.emplace_back();
    std::vector<int>& node = nodes_[static_cast<size_t>(entry->second)];
    node_index_[m] = entry->second;
    local_index_[m] = static_cast<int>(node.size());
    package_[m] = members[m].package;
    node.push_back(static_cast<int>(m));
  }
}

std::vector<int> Hierarchy::leaders() const {
  std::vector<int> leaders;
  for (const std::vector<int>& node : nodes_)
    leaders.push_back(node.front());
  return leaders;
}

std::vector<int> Hierarchy::with_local_index(int local) const {
  std::vector<int> members;
  for (const std::vector<int>& node : nodes_)
    if (local >= 0 && local < static_cast<int>(node.size()))
      members.push_back(node[static_cast<size_t>(local)]);
  return members;
}

bool Hierarchy::balanced() const {
  return std::all_of(nodes_.begin(), nodes_.end(),
                     [&](const std::vector<int>& node) { return node.size() == nodes_[0].size(); });
}

std::vector<int> Hierarchy::ring_order() const {
  std::vector<int> order;
  order.reserve(node_index_.size());
  for (const std::vector<int>& node : nodes_) {
    std::vector<int> members = node;
    auto package_key = [&](int m) {
      const int p = package_[static_cast<size_t>(m)];
      return p < 0 ? INT_MAX : p;
    };
    std::stable_sort(members.begin(), members.end(),
                     [&](int a, int b) { return package_key(a) < package_key(b); });
    order.insert(order.end(), members.begin(), members.end());
  }
  return order;
}

size_t Hierarchy::bytes() const {
  size_t bytes = nodes_.capacity() * sizeof(nodes_[0]);
  for (const auto& node : nodes_)
    bytes += node.capacity() * sizeof(int);
  return bytes +
         (node_index_.capacity() + local_index_.capacity() + package_.capacity()) * sizeof(int);
}

}  // namespace ibcoll::topo
