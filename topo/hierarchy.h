// Hierarchy: a communicator's members arranged by where they run, for algorithms built from
// flat ones on subgroups: the members of each node, the node leaders, the members with the same
// local index on every node, and a node-major, package-aware order for rings (a ring in it
// crosses each node boundary once and each package boundary inside a node once).
#pragma once

#include <span>
#include <vector>

namespace ibcoll::topo {

// Where one member runs: `node` is any number equal for members on one node; `package` the
// package of its cpus on that node (-1: unknown, or they span several).
struct MemberPlace {
  int node = 0;
  int package = -1;
};

class Hierarchy {
 public:
  explicit Hierarchy(std::span<const MemberPlace> members);

  int size() const { return static_cast<int>(node_index_.size()); }
  // The members of each node, ascending; nodes in the order of their lowest member.
  const std::vector<std::vector<int>>& nodes() const { return nodes_; }
  int node_index(int member) const { return node_index_[static_cast<size_t>(member)]; }
  int local_index(int member) const { return local_index_[static_cast<size_t>(member)]; }
  // Each node's lowest member, in node order.
  std::vector<int> leaders() const;
  // The members whose local index is `local`, one per node that has that many, in node order.
  std::vector<int> with_local_index(int local) const;
  bool spans_nodes() const { return nodes_.size() > 1; }
  // Every node holds the same number of members.
  bool balanced() const;
  // Node by node in node order; inside a node by package (unknown last), then ascending.
  std::vector<int> ring_order() const;
  // Heap bytes it holds.
  size_t bytes() const;

 private:
  std::vector<std::vector<int>> nodes_;
  std::vector<int> node_index_;   // by member
  std::vector<int> local_index_;  // by member: its place in its node's list
  std::vector<int> package_;      // by member
};

}  // namespace ibcoll::topo
