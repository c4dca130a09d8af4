#include "collectives/membership.h"

#include <algorithm>

namespace ibcoll::collectives {
namespace {

Subgroup subgroup_of(const std::vector<int>& member_indices, const std::vector<int>& members,
                     int rank) {
  Subgroup group;
  for (int m : member_indices) {
    if (m == rank) group.rank = group.size();
    group.peers.push_back(members[static_cast<size_t>(m)]);
  }
  return group;
}

size_t bytes_of(const std::vector<int>& v) {
  return v.capacity() * sizeof(int);
}

}  // namespace

Membership::Membership(std::vector<int> members, int rank, topo::Hierarchy hierarchy)
    : members_(std::move(members)), rank_(rank) {
  const std::vector<int> ring_order = hierarchy.ring_order();
  bool reordered = false;
  for (size_t i = 0; i < ring_order.size(); ++i)
    reordered |= ring_order[i] != static_cast<int>(i);
  if (reordered) {
    ring_position_.resize(members_.size());
    for (size_t i = 0; i < ring_order.size(); ++i) {
      ring_members_.push_back(members_.at(static_cast<size_t>(ring_order[i])));
      ring_position_.at(static_cast<size_t>(ring_order[i])) = static_cast<int>(i);
    }
  }
  if (!hierarchy.spans_nodes()) return;
  NodeGroups& g = node_groups_.emplace(NodeGroups{std::move(hierarchy), {}, {}, {}, 1});
  const topo::Hierarchy& kept = g.hierarchy;
  const auto& nodes = kept.nodes();
  g.node = subgroup_of(nodes[static_cast<size_t>(kept.node_index(rank))], members_, rank);
  g.leaders = subgroup_of(kept.leaders(), members_, rank);
  g.rails = static_cast<int>(
      std::min_element(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
        return a.size() < b.size();
      })->size());
  const int local = kept.local_index(rank);
  if (local < g.rails) g.rail = subgroup_of(kept.with_local_index(local), members_, rank);
}

size_t Membership::bytes() const {
  size_t bytes = bytes_of(members_) + bytes_of(ring_members_) + bytes_of(ring_position_);
  if (node_groups_) {
    bytes += node_groups_->hierarchy.bytes() + bytes_of(node_groups_->node.peers) +
             bytes_of(node_groups_->leaders.peers) + bytes_of(node_groups_->rail.peers);
  }
  return bytes;
}

}  // namespace ibcoll::collectives
