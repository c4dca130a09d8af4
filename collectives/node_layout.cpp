#include "collectives/node_layout.h"

#include "collectives/allreduce/staged.h"
#include "collectives/partition.h"
#include "collectives/select.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {

NodeLayout::NodeLayout(transport::Channel& channel, const NodeGroups& groups,
                       std::optional<SlotGroup> node_slots, const NodeTuning& tuning,
                       uint64_t first_sequence)
    : channel_(channel),
      groups_(groups),
      node_slots_(std::move(node_slots)),
      tuning_(tuning),
      first_sequence_(first_sequence) {
  if (groups_.node.size() < 2) node_slots_.reset();  // nobody to share them with
}

std::unique_ptr<CollectiveTask> NodeLayout::flat_call(Collective collective, const Subgroup& group,
                                                      const CollectiveArgs& args, uint64_t base_tag,
                                                      int offset, bool may_use_slots) {
  SlotGroup* slots =
      &group == &groups_.node && may_use_slots && node_slots_ ? &*node_slots_ : nullptr;
  const Algorithm& algorithm =
      select_algorithm(collective, args.count * type_size(args.type),
                       {group.size(), slots != nullptr, 1, false, {}, tuning_}, "");
  Group flat{channel_, group.rank, group.peers, slots, 0, nullptr, first_sequence_};
  if (algorithm.uses_slots) flat.slot_sequence = slots->next_sequence++;
  return algorithm.make(flat, args, base_tag + static_cast<uint64_t>(offset) * kStepsPerCall);
}

std::unique_ptr<CollectiveTask> NodeLayout::node_reduce_scatter(const CollectiveArgs& args,
                                                                uint64_t base_tag, int offset) {
  if (!node_slots_) return nullptr;
  Group flat{
      channel_, groups_.node.rank, groups_.node.peers, &*node_slots_, node_slots_->next_sequence++,
      nullptr,  first_sequence_};
  return make_staged_reduce_scatter(
      flat, args, base_tag + static_cast<uint64_t>(offset) * kStepsPerCall, groups_.rails);
}

CollectiveArgs NodeLayout::slice(const CollectiveArgs& args, int rail) const {
  const Span span = part(args.count, static_cast<size_t>(groups_.rails), static_cast<size_t>(rail));
  const size_t offset = span.begin * type_size(args.type);
  CollectiveArgs narrowed = args;
  narrowed.count = span.count;
  narrowed.recv = static_cast<std::byte*>(args.recv) + offset;
  if (args.send) narrowed.send = static_cast<const std::byte*>(args.send) + offset;
  return narrowed;
}

std::vector<std::unique_ptr<CollectiveTask>> NodeLayout::node_allgather(const CollectiveArgs& args,
                                                                        uint64_t base_tag,
                                                                        int first_offset) {
  std::vector<std::unique_ptr<CollectiveTask>> calls;
  for (int rail = 0; rail < groups_.rails; ++rail) {
    CollectiveArgs piece = slice(args, rail);
    piece.root = rail;
    calls.push_back(
        flat_call(Collective::bcast, groups_.node, piece, base_tag, first_offset + rail, false));
  }
  return calls;
}

}  // namespace ibcoll::collectives
