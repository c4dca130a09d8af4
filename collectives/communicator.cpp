#include "collectives/communicator.h"

#include <limits>
#include <string>

#include "base/log.h"
#include "collectives/bcast/light.h"
#include "collectives/select.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {
namespace {

// The light bcasts' running digest: FNV-1a over their fields, in call order.
uint64_t mixed(uint64_t digest, const CallSignature& call) {
  for (uint64_t field : call.fields()) {
    digest ^= field;
    digest *= 1099511628211ull;
  }
  return digest;
}

}  // namespace

Communicator::Communicator(transport::Channel& channel,
                           std::shared_ptr<const Membership> membership, uint16_t id,
                           uint64_t first_sequence, Policy policy, std::optional<SlotGroup> slots,
                           std::optional<SlotGroup> node_slots)
    : channel_(channel),
      membership_(std::move(membership)),
      id_(id),
      policy_(std::move(policy)),
      slots_(std::move(slots)),
      first_sequence_(std::max<uint64_t>(first_sequence & kSequenceMask, 1)),
      next_sequence_(first_sequence_),
      revocation_(std::make_shared<Revocation>(call_tag(id_, first_sequence_), membership_)) {
  if (const NodeGroups* groups = membership_->node_groups()) {
    layout_ = std::make_unique<NodeLayout>(channel_, *groups, std::move(node_slots), policy_.tuning,
                                           first_sequence_);
  }
  check_forced_algorithms();
}

Communicator::~Communicator() = default;

void Communicator::abandon_slots() {
  if (slots_) slots_->binding.abandon();
  if (layout_) layout_->abandon_slots();
}

std::vector<int> Communicator::ring_order() const {
  const std::vector<int>& position = membership_->ring_position();
  std::vector<int> order(static_cast<size_t>(size()));
  for (size_t m = 0; m < order.size(); ++m)
    order[position.empty() ? m : static_cast<size_t>(position[m])] = static_cast<int>(m);
  return order;
}

void Communicator::set_policy(Policy policy) {
  policy_ = std::move(policy);
  for (RecentChoices& recent : recent_choices_)
    recent = {};
  check_forced_algorithms();
}

// Fails now, not at the first call, on an unknown forced algorithm.
void Communicator::check_forced_algorithms() const {
  choose(Collective::allreduce, 0, DataType::uint8);
  choose(Collective::bcast, 0, DataType::uint8);
}

const Algorithm& Communicator::choose(Collective collective, size_t count, DataType type) const {
  const std::string& forced =
      collective == Collective::allreduce ? policy_.allreduce_algorithm : policy_.bcast_algorithm;
  const int nodes = layout_ ? static_cast<int>(layout_->hierarchy().nodes().size()) : 1;
  return select_algorithm(
      collective, count * type_size(type),
      {size(), slots_.has_value(), nodes, policy_.check_calls && size() > 1,
       nodes == 1 ? policy_.single_copy : transport::shm::SingleCopySizes{}, policy_.tuning},
      forced);
}

const Algorithm& Communicator::algorithm_for(Collective collective, const CollectiveArgs& args) {
  const size_t bytes = args.count * type_size(args.type);
  RecentChoices& recent = recent_choices_[static_cast<size_t>(collective)];
  for (const Choice& c : recent.kept)
    if (c.algorithm && c.bytes == bytes) return *c.algorithm;
  const Algorithm& algorithm = choose(collective, args.count, args.type);
  if (recent.logged != &algorithm) {  // said once per change, not per call
    IBCOLL_LOG(info, "communicator " << id_ << ": " << collective_name(collective) << " of "
                                     << bytes << " bytes on " << size() << " ranks uses "
                                     << algorithm.name);
    recent.logged = &algorithm;
  }
  recent.kept[recent.next] = {bytes, &algorithm};
  recent.next = (recent.next + 1) % RecentChoices::kKept;
  return algorithm;
}

void Communicator::check_arguments(Collective collective, const CollectiveArgs& a) const {
  auto fail = [](const std::string& message) { throw Error(Code::invalid_argument, message); };
  if (static_cast<int>(a.type) >= kDataTypeCount) {
    fail("type: " + std::to_string(static_cast<int>(a.type)) + " is not a data type");
  }
  size_t bytes = 0;  // no division: this runs on every call
  if (__builtin_mul_overflow(a.count, type_size(a.type), &bytes)) {
    fail("count: " + std::to_string(a.count) + " elements of " + type_name(a.type) +
         " are more bytes than an address can count");
  }
  if (collective == Collective::allreduce) {
    if (static_cast<int>(a.op) >= kReduceOpCount) {
      fail("op: " + std::to_string(static_cast<int>(a.op)) + " is not a reduction op");
    }
    if (Status s = check_reduction(a.type, a.op); !s.ok()) throw Error(s);
    if (a.count > 0 && !a.send) fail("send: null with count " + std::to_string(a.count));
    if (a.count > 0 && !a.recv) fail("recv: null with count " + std::to_string(a.count));
  } else {
    if (a.root < 0 || a.root >= size()) {
      fail("root: " + std::to_string(a.root) + " is outside [0, " + std::to_string(size()) + ")");
    }
    if (a.count > 0 && !a.recv) fail("buffer: null with count " + std::to_string(a.count));
  }
}

PreparedCall Communicator::prepare(Collective collective, const CollectiveArgs& args,
                                   uint64_t extra) {
  check_arguments(collective, args);
  if (revocation_->revoked()) throw Error(revocation_->why());
  if (slots_ && !slots_->failure.ok()) throw Error(slots_->failure);
  if (const Status* failure = layout_ ? layout_->slot_failure() : nullptr) throw Error(*failure);
  // A call with a member known gone fails before it takes a turn, where it would otherwise
  // succeed or not by how soon its first look at the members came (a small bcast's root sends
  // and returns). While no rank is known gone, that is one load.
  if (channel_.failures_known() > 0) {
    if (const Status* gone = failed_among(channel_, members())) throw Error(*gone);
  }
  CollectiveArgs call = args;
  call.agreed = extra;
  const Algorithm& algorithm = algorithm_for(collective, call);
  const uint64_t tag = call_tag(id_, next_sequence_);
  const int sequences = algorithm.across_nodes ? layout_->sequences_per_call() : 1;
  if (next_sequence_ + static_cast<uint64_t>(sequences) > kFirstAgreementSequence) {
    throw Error(Code::system_error, "communicator " + std::to_string(id_) +
                                        ": its calls have used every sequence number (" +
                                        std::to_string(kFirstAgreementSequence) + ")");
  }
  next_sequence_ += static_cast<uint64_t>(sequences);
  const uint64_t last_tag = tag + static_cast<uint64_t>(sequences) * kStepsPerCall - 1;
  Group group{channel_, rank(),        members(),      slots_ ? &*slots_ : nullptr,
              0,        layout_.get(), first_sequence_};
  const bool check = policy_.check_calls && size() > 1 && !algorithm.uses_slots;
  if (check && !slots_) {
    if (!probes_) {
      probes_ = std::make_unique<ProbeDesk>(channel_, members(), rank(), id_, first_sequence_,
                                            policy_.probe_after, policy_.probe_roster);
    }
    probes_->serve();
    group.probes = probes_.get();
  }
  // Every call that touches the slots takes a turn there; with checks on, that is every call,
  // whatever algorithm each rank picked.
  if (slots_ && (check || algorithm.uses_slots)) group.slot_sequence = slots_->next_sequence++;
  Group task_group = group;
  int task_root = call.root;
  if (const Membership& m = *membership_; algorithm.ring_ordered && !m.ring_members().empty()) {
    task_group.rank = m.ring_position()[static_cast<size_t>(rank())];
    task_group.peers = m.ring_members();
    task_root = m.ring_position()[static_cast<size_t>(call.root)];
  }
  return {algorithm, group, call, tag, last_tag, check, task_group, task_root};
}

std::unique_ptr<Operation> Communicator::start(const PreparedCall& call) {
  CallSignature signature = signature_of(call.algorithm.collective, call.args);
  std::unique_ptr<CallCheck> checker;
  std::unique_ptr<CollectiveTask> task;
  const bool by_messages = call.checked && !slots_;
  // Which calls are checked in full goes by the call's number, not by a count of earlier
  // calls: ranks whose earlier calls differed (one made a light bcast, another an allreduce)
  // still agree on it.
  const bool light = by_messages && call.self_checking() &&
                     call.algorithm.collective == Collective::bcast &&
                     sequence_of(call.tag) % static_cast<uint64_t>(policy_.full_check_every) != 0;
  if (by_messages) {
    if (light) {
      light_digest_ = mixed(light_digest_, signature);
    } else if (call.follows_held) {  // a full check: it vouches for the light calls before it
      signature.group += light_digest_;
      light_digest_ = 0;
    }
    probes_->record(sequence_of(call.tag), sequence_of(call.last_tag), signature);
  }
  if (light) {
    task = make_light_bcast(call.group, call.args, call.tag, signature);
  } else if (by_messages && call.self_checking()) {  // the algorithm is its own check
    task = call.algorithm.make_checked(call.group, call.args, call.tag, signature);
  } else {
    if (call.checked) {
      checker = slots_ ? make_slot_check(call.group, signature)
                       : make_message_check(call.group, signature, call.tag);
    }
    CollectiveArgs task_args = call.args;
    task_args.root = call.task_root;
    task = call.algorithm.make(call.task_group, task_args, call.tag);
  }
  auto operation = std::make_unique<Operation>(
      std::move(task), std::move(checker), channel_, members(), call.tag, call.last_tag,
      first_sequence_, call.algorithm.collective, call.algorithm.name, *revocation_);
  operation->start();
  if (held_ && call.follows_held) operation->after(std::move(held_));
  return operation;
}

void Communicator::hold(std::unique_ptr<Operation> returned) {
  if (held_) throw Error(Code::internal, "a call returned early while an earlier one ran on");
  held_ = std::move(returned);
}

}  // namespace ibcoll::collectives
