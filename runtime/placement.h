// Where the ranks of a job run: each rank's node (IBCOLL_NODE, else its host name and boot id,
// so that a rebooted or cloned host is another node) and the cpus it may run on (its affinity,
// which cgroup cpusets limit too), gathered through the bootstrap when the job starts. From
// them: the ranks of this node, and whether they outnumber the cpus they have between them.
// This node's topology (IBCOLL_TOPOLOGY or the machine's) is loaded in the same step, so a rank
// that cannot load it fails the start on every rank.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/bootstrap/bootstrap.h"
#include "runtime/config.h"
#include "topo/cpu_set.h"
#include "topo/hierarchy.h"
#include "topo/topology.h"

namespace ibcoll::runtime {

// IBCOLL_NODE, else "HOST/BOOT" with the first 8 digits of the kernel's boot id.
std::string this_node(const Config& config);

struct Placement {
  std::string node;                         // this rank's
  topo::CpuSet cpus;                        // this rank's
  std::vector<int> node_ranks;              // the job ranks on this node, ascending
  std::vector<topo::CpuSet> node_bindings;  // their cpus, in that order
  std::optional<topo::Topology> topology;   // always set once exchanged
  // Every job rank's node (numbered in the order of their lowest ranks) and package: what
  // topo::Hierarchy arranges a communicator's members by. 8 bytes per rank of the job.
  std::vector<topo::MemberPlace> places;

  int local_rank(int rank) const;  // its index in node_ranks, -1 if elsewhere
  int node_cpus() const;           // cpus this node's ranks have between them
  bool oversubscribed() const { return static_cast<int>(node_ranks.size()) > node_cpus(); }
  // This rank's cpus as the topology knows them (all of it when they fall outside, as with a
  // topology from another machine).
  topo::CpuSet cpus_in_topology() const;
  // The places of these job ranks, in order.
  std::vector<topo::MemberPlace> places_of(const std::vector<int>& ranks) const;
};

// Every rank calls it once at start (a set-up exchange of the whole job).
Placement exchange_placement(Bootstrap& bootstrap, const Config& config);

}  // namespace ibcoll::runtime
