// Membership: a communicator's members as one of them sees them: their channel peers in order,
// the order rings take them in and, when they span nodes, where they run and the subgroups the
// hierarchical algorithms use. It depends on the members and this member alone, never on the
// communicator's id or calls, so communicators of the same members share one: a duplicate
// costs nothing that grows with the job. Built once, read only after.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "topo/hierarchy.h"

namespace ibcoll::collectives {

// Members of one subgroup, as channel peers, and this member's index among them (-1: not one).
struct Subgroup {
  std::vector<int> peers;
  int rank = -1;
  bool has_me() const { return rank >= 0; }
  int size() const { return static_cast<int>(peers.size()); }
};

// Across nodes: this node's members, the node leaders, and this member's rail (the members
// with its local index on every node).
struct NodeGroups {
  topo::Hierarchy hierarchy;
  Subgroup node, leaders, rail;  // rail: empty past the first `rails`
  int rails = 1;                 // members the smallest node holds
};

class Membership {
 public:
  // `members`: the channel peers in order; this process is members[rank]; `hierarchy`: where
  // they run (kept when they span nodes).
  Membership(std::vector<int> members, int rank, topo::Hierarchy hierarchy);

  const std::vector<int>& members() const { return members_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(members_.size()); }
  // Empty when the ring order is the members' own; else the peers in ring order, and by member
  // index its place among them.
  const std::vector<int>& ring_members() const { return ring_members_; }
  const std::vector<int>& ring_position() const { return ring_position_; }
  // Null when the members run on one node.
  const NodeGroups* node_groups() const { return node_groups_ ? &*node_groups_ : nullptr; }
  // Heap bytes it holds (for the record: ibcoll_info --plan).
  size_t bytes() const;

 private:
  std::vector<int> members_;
  int rank_;
  std::vector<int> ring_members_;
  std::vector<int> ring_position_;
  std::optional<NodeGroups> node_groups_;
};

}  // namespace ibcoll::collectives
