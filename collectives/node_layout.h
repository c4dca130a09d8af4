// NodeLayout: a communicator that spans nodes, seen from one member, for the hierarchical
// algorithms: the subgroups they run flat algorithms on (its Membership's NodeGroups: this
// node's members, the node leaders, the members with this member's local index on every node:
// its rail), and this communicator's share of the node's slot region. Built once per
// communicator; a call only reads it, apart from taking turns in the node's slots.
#pragma once

#include <memory>
#include <optional>
#include <vector>

#include "collectives/call_check.h"
#include "collectives/membership.h"
#include "collectives/task.h"
#include "collectives/tuning.h"
#include "topo/hierarchy.h"

namespace ibcoll::collectives {

class NodeLayout {
 public:
  // `groups`: its membership's (which outlives it); `node_slots`: the slot region shared by this
  // node's members, when there is one; `tuning`: this node's thresholds, for the calls inside
  // it; `first_sequence`: the communicator's first call's.
  NodeLayout(transport::Channel& channel, const NodeGroups& groups,
             std::optional<SlotGroup> node_slots, const NodeTuning& tuning,
             uint64_t first_sequence);

  const topo::Hierarchy& hierarchy() const { return groups_.hierarchy; }
  const Subgroup& node() const { return groups_.node; }
  const Subgroup& leaders() const { return groups_.leaders; }  // each node's lowest member
  const Subgroup& rail() const { return groups_.rail; }        // empty past the first rails()
  // Members the smallest node holds: the slices a rail allreduce splits a vector into.
  int rails() const { return groups_.rails; }
  // The communicator sequence numbers (tags) one hierarchical call takes: one per flat call
  // it runs at once or in turn, so none of them shares a tag.
  int sequences_per_call() const { return 2 + groups_.rails; }

  // A flat call of `collective` on `group`, under sequence offset `offset` of the call with
  // tag `base_tag`: its algorithm from the selection table for the group's size, in the
  // node's slots when `group` is this node and `may_use_slots` (taking a turn there).
  std::unique_ptr<CollectiveTask> flat_call(Collective collective, const Subgroup& group,
                                            const CollectiveArgs& args, uint64_t base_tag,
                                            int offset, bool may_use_slots = true);
  // `args` narrowed to slice `rail` of rails() (send too, when there is one).
  CollectiveArgs slice(const CollectiveArgs& args, int rail) const;
  // The node's reduce-scatter of args into the rails' slices through its staging halves (the
  // member with local index i gets slice i of args.recv reduced, in member order), taking a
  // slot turn; null when the node has no slot region (then a node allreduce does instead).
  std::unique_ptr<CollectiveTask> node_reduce_scatter(const CollectiveArgs& args, uint64_t base_tag,
                                                      int offset);
  // The node's allgather of the slices of args.recv, to add as one stage: slice i broadcast
  // from local index i, all at once under offsets first_offset.., by messages (a slot turn
  // would wait for the one before it).
  std::vector<std::unique_ptr<CollectiveTask>> node_allgather(const CollectiveArgs& args,
                                                              uint64_t base_tag, int first_offset);
  // Lets go of the node's slot set with no member of the node to bind it later
  // (SlotBinding::abandon).
  void abandon_slots() {
    if (node_slots_) node_slots_->binding.abandon();
  }
  // The node's slot region failed in an earlier call, if it did: the communicator is unusable.
  const Status* slot_failure() const {
    return node_slots_ && !node_slots_->failure.ok() ? &node_slots_->failure : nullptr;
  }

 private:
  transport::Channel& channel_;
  const NodeGroups& groups_;
  std::optional<SlotGroup> node_slots_;
  NodeTuning tuning_;
  uint64_t first_sequence_;
};

}  // namespace ibcoll::collectives
