#include "runtime/context.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <numeric>
#include <utility>

#include "base/digest.h"
#include "base/log.h"
#include "base/size_text.h"
#include "runtime/bootstrap/set_up_exchange.h"
#include "runtime/connection_plan.h"
#include "runtime/hang_report.h"
#include "runtime/node_calibration.h"
#include "runtime/shm_endpoint.h"
#ifdef IBCOLL_HAVE_UCX
#include "runtime/ucx_transport.h"
#endif
#ifdef IBCOLL_HAVE_VERBS
#include "runtime/verbs_endpoint.h"
#endif

namespace ibcoll::runtime {
namespace {

using collectives::Collective;
using collectives::Communicator;

// The revoked keys kept for communicators not made yet (Context::heard).
constexpr size_t kRevokedBeforeMadeKept = 4096;
// Agreements of freed communicators kept for members that decide later (Context::release).
constexpr size_t kFreedAgreementsKept = 16;

// Every rank in [0, size), none twice: else Error(invalid_argument) naming `ranks`.
void check_rank_list(std::span<const int> ranks, int size) {
  std::vector<bool> seen(static_cast<size_t>(size));
  for (int r : ranks) {
    if (r < 0 || r >= size) {
      throw Error(Code::invalid_argument,
                  "ranks: " + std::to_string(r) + " is outside [0, " + std::to_string(size) + ")");
    }
    if (seen[static_cast<size_t>(r)]) {
      throw Error(Code::invalid_argument, "ranks: " + std::to_string(r) + " is listed twice");
    }
    seen[static_cast<size_t>(r)] = true;
  }
}

}  // namespace

Request::Request(Context& context, std::unique_ptr<collectives::Operation> operation)
    : context_(context), operation_(std::move(operation)) {
  context_.in_flight_.push_back(this);
}

Request::~Request() {
  auto& list = context_.in_flight_;
  list.erase(std::find(list.begin(), list.end(), this));
}

Context::Context() : ids_(job_.config().largest_communicator_id) {
  open_transports_and_world();
  install_hang_report_signal();
}

Context::Context(std::unique_ptr<Bootstrap> bootstrap)
    : job_(std::move(bootstrap)), ids_(job_.config().largest_communicator_id) {
  open_transports_and_world();
  install_hang_report_signal();
}

void Context::open_transports_and_world() {
  open_transports();
  // Calibration runs on each node after the last job-wide exchange: where it may run, every
  // rank learns the others' verdict, so a node that failed it fails the start everywhere
  // instead of leaving the job half started (under an MPI library, the half that started would
  // wait on the other, which fell back to MPI's collectives).
  const Config& config = job_.config();
  if (config.calibrate_slots_allreduce || config.calibrate_single_copy_allreduce) {
    exchange_set_up(job_.bootstrap(), "node-tuned", [&] {
      tune_node();
      return std::string();
    });
  } else {
    tune_node();
  }
  std::vector<int> everyone(static_cast<size_t>(job_.size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  world_ = make_communicator(std::move(everyone), job_.rank(), 1, 1);
#ifdef IBCOLL_HAVE_VERBS
  if (verbs_ && job_.config().connect_planned) connect_planned_peers();
#endif
}

#ifdef IBCOLL_HAVE_VERBS
void Context::connect_planned_peers() {
  const topo::Hierarchy hierarchy(placement_.places_of(world_->members()));
  // Only a head start: whatever fails here is left to the first use of each connection.
  try {
    int connecting = 0;
    for (int peer : planned_peers(job_.rank(), hierarchy, world_->policy())) {
      if (channel_->channel_of(peer) != verbs_.get()) continue;  // shared memory: nothing to make
      verbs_->connect(peer);
      ++connecting;
    }
    IBCOLL_LOG(info, "connecting to the " << connecting
                                          << " verbs peers of the connection plan "
                                             "(IBCOLL_CONNECT=planned)");
  } catch (const Error& e) {
    IBCOLL_LOG(warn, "connecting ahead to the plan's peers: " << e.what()
                                                              << "; they connect on first use");
  }
}
#endif

std::unique_ptr<Communicator> Context::make_communicator(std::vector<int> members, int rank,
                                                         uint16_t id, uint64_t stamp) {
  topo::Hierarchy hierarchy(placement_.places_of(members));
  return make_communicator(std::make_shared<const collectives::Membership>(std::move(members), rank,
                                                                           std::move(hierarchy)),
                           id, stamp);
}

std::unique_ptr<Communicator> Context::make_communicator(
    std::shared_ptr<const collectives::Membership> membership, uint16_t id, uint64_t stamp) {
  auto slots = slot_group(membership->members(), id, stamp);
  std::optional<collectives::SlotGroup> node_slots;
  if (const collectives::NodeGroups* groups = membership->node_groups()) {
    // This node's members share its slot region under the id.
    node_slots = slot_group(groups->node.peers, id, stamp);
  }
  collectives::Policy policy = job_.config().policy;
  if (shm_) policy.single_copy = shm_->single_copy();
  policy.tuning = tuning_;
  policy.probe_roster = &probe_roster_;
  auto communicator =
      std::make_unique<Communicator>(*channel_, std::move(membership), id, stamp, std::move(policy),
                                     std::move(slots), std::move(node_slots));
  list_revocable(*communicator);
  return communicator;
}

void Context::list_revocable(const Communicator& communicator) {
  const std::shared_ptr<collectives::Revocation>& revocation = communicator.revocation();
  std::erase_if(revocations_, [](const auto& entry) { return entry.second.expired(); });
  revocations_[revocation->key()] = revocation;
  if (auto early = revoked_before_made_.find(revocation->key());
      early != revoked_before_made_.end()) {
    revocation->revoke(*channel_, early->second, early->second);
    revoked_before_made_.erase(early);
  }
}

void Context::revoke(Communicator& communicator) {
  communicator.revocation()->revoke(*channel_, job_.rank(), job_.rank());
  send_out_notices();
}

void Context::pass_word_on(const Status& outcome) {
  if (outcome.code() == Code::revoked) send_out_notices();
}

Error Context::refused(const Error& e) {
  if (e.status().code() == Code::invalid_argument) return e;  // bad input changes nothing
  pass_word_on(e.status());
  job_.engine().progress();
  if (const Status* fenced = channel_->fenced()) return Error(*fenced);
  return e;
}

// The caller may make no call after this one, and this rank's notices may wait for a connection
// that only progress makes: they are driven out of this process first, for one keepalive
// interval (a handshake with a peer in the library takes milliseconds). A partner outside the
// library all that time gets it with this rank's later progress or from a member that has it.
void Context::send_out_notices() {
  if (!channel_->notices_pending()) return;
  const std::chrono::milliseconds patience =
      std::min(job_.config().timeout, job_.config().ucx.keepalive);
  try {
    job_.engine().wait(
        [&] {
          advance_all();
          return !channel_->notices_pending();
        },
        patience, "notices");
  } catch (const Error& e) {
    if (e.status().code() != Code::timeout) throw;
    IBCOLL_LOG(info,
               "a notice still waits to leave after " << patience.count() << " ms; it goes later");
  }
}

void Context::heard(int teller, const transport::Notice& notice) {
  if (notice.kind == transport::Notice::Kind::agreeing) {
    for (HeldAgreement& held : agreements_) {
      if (held.agreement->key() == notice.subject && held.agreement->instance() == notice.detail)
        held.agreement->heard_from(teller);
    }
    return;
  }
  if (notice.kind != transport::Notice::Kind::revoked) return;
  const auto by = static_cast<int>(notice.detail);
  if (by < 0 || by >= job_.size()) return;
  IBCOLL_LOG(debug, "rank " << teller << " says communicator key " << notice.subject
                            << " was revoked by rank " << by);
  auto listed = revocations_.find(notice.subject);
  if (std::shared_ptr<collectives::Revocation> revocation =
          listed == revocations_.end() ? nullptr : listed->second.lock()) {
    revocation->revoke(*channel_, by, teller);
  } else {
    // Also the word that comes late for one revoked and freed here: a key never comes back
    // (a later communicator of the id starts past its sequences), so such entries are only
    // kept too long; a bound keeps them few.
    if (revoked_before_made_.size() >= kRevokedBeforeMadeKept) revoked_before_made_.clear();
    revoked_before_made_.emplace(notice.subject, by);
  }
}

collectives::AgreementDecision Context::agree(Communicator& communicator,
                                              collectives::Agreement::Fold fold,
                                              std::vector<uint64_t> mine) {
  const Config& config = job_.config();
  collectives::Agreement::Settings settings;
  settings.fence_after = config.timeout;  // kNoTimeout where it is 0
  // Several heartbeats within the deadline, however short it is set.
  settings.heartbeat =
      std::max(std::chrono::milliseconds(1), std::min(config.ucx.keepalive, config.timeout / 4));
  if (config.fault == Config::Fault::agreement_exit)
    settings.exit_after_messages = config.fault_after;
  const uint64_t key = communicator.revocation()->key();
  const uint32_t number = communicator.take_agreement_number();
  agreements_.push_back({std::make_unique<collectives::Agreement>(
                             *channel_, communicator.membership(), key, communicator.id(), number,
                             fold, std::move(mine), settings),
                         std::nullopt});
  collectives::Agreement& agreement = *agreements_.back().agreement;
  // No deadline of its own: it fences out a member silent for IBCOLL_TIMEOUT, and so ends.
  job_.engine().wait(
      [&] {
        advance_all();
        return agreement.ended();
      },
      kNoTimeout, "agreement");
  if (!agreement.failure().ok()) throw Error(agreement.failure());
  collectives::AgreementDecision decision = agreement.decision();
  communicator.set_agreed_failed(decision.failed.list());
  forget_agreements(key, number);
  return decision;
}

std::unique_ptr<Communicator> Context::shrink(Communicator& communicator) {
  using Fold = collectives::Agreement::Fold;
  collectives::AgreementDecision agreed =
      agree(communicator, Fold::maximum, {ids_.next(), ids_.stamp()});
  uint64_t id = agreed.values[0];
  const uint64_t stamp = agreed.values[1];
  if (id > ids_.largest()) {  // a member holds a high id: the lowest free on all
    agreed = agree(communicator, Fold::bitwise_or, ids_.held_bitmap());
    id = ids_.lowest_clear(agreed.values);
    if (id == 0) {
      throw Error(Code::system_error, "shrink: all " + std::to_string(ids_.largest() - 1) +
                                          " communicator ids are held by live communicators");
    }
  }
  ids_.see(stamp);
  std::vector<int> members;
  int rank = -1;
  for (int m = 0; m < communicator.size(); ++m) {
    if (agreed.failed.contains(m)) continue;
    if (m == communicator.rank()) rank = static_cast<int>(members.size());
    members.push_back(communicator.members()[static_cast<size_t>(m)]);
  }
  IBCOLL_LOG(info, "shrink: communicator " << communicator.id() << " of " << communicator.size()
                                           << " ranks goes on as communicator " << id << " of "
                                           << members.size());
  return holding(static_cast<uint32_t>(id), stamp, [&] {
    return make_communicator(std::move(members), rank, static_cast<uint16_t>(id), stamp);
  });
}

void Context::forget_agreements(uint64_t key, uint32_t before) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(agreements_, [&](const HeldAgreement& held) {
    const collectives::Agreement& a = *held.agreement;
    return (a.key() == key && a.instance() < before) ||
           (held.freed_at && now - *held.freed_at > job_.config().timeout);
  });
  // A program that agrees on communicators it frees at once keeps kFreedAgreementsKept at most.
  for (;;) {
    auto oldest = agreements_.end();
    size_t freed = 0;
    for (auto it = agreements_.begin(); it != agreements_.end(); ++it) {
      if (!it->freed_at) continue;
      ++freed;
      if (oldest == agreements_.end() || *it->freed_at < *oldest->freed_at) oldest = it;
    }
    if (freed <= kFreedAgreementsKept) break;
    agreements_.erase(oldest);
  }
  std::erase_if(ids_kept_for_agreements_, [&](const KeptId& kept) {
    for (const HeldAgreement& held : agreements_)
      if (held.agreement->key() == kept.key) return false;
    ids_.release(kept.id, kept.next_sequence);
    return true;
  });
}

std::unique_ptr<Communicator> Context::holding(uint32_t id, uint64_t stamp,
                                               FunctionRef<std::unique_ptr<Communicator>()> make) {
  if (stamp == 0)
    throw Error(Code::invalid_argument, "stamp: 0 is none (pass the members' largest)");
  ids_.hold(id, stamp);
  try {
    return make();
  } catch (...) {
    ids_.release(id, 0);
    throw;
  }
}

// The node's ranks measure the thresholds no variable sets on a communicator of their own. Its
// id, 0, is no other communicator's, so the slot region it uses is the calibration's alone.
void Context::tune_node() {
  const Config& config = job_.config();
  if (config.fault == Config::Fault::node_calibration) {
    throw Error(Code::internal, "node calibration: failed on purpose (IBCOLL_FAULT)");
  }
  tuning_ = config.policy.tuning;
  std::string slots_origin = "IBCOLL_ALLREDUCE_SLOTS_MAX";
  std::string single_copy_origin = "IBCOLL_ALLREDUCE_SINGLE_COPY_FROM";
  bool measure_slots = config.calibrate_slots_allreduce;
  bool measure_single_copy = config.calibrate_single_copy_allreduce;
  const std::string& forced = config.policy.allreduce_algorithm;
  std::string unmeasured;  // why nothing is
  if (!shm_ || !config.shm_slots) {
    unmeasured = "unused: no slots on this node";
  } else if (!forced.empty() && forced != "auto") {
    unmeasured = "unused: IBCOLL_ALLREDUCE_ALGO=" + forced;
  } else if (placement_.oversubscribed()) {
    // Timings there measure the scheduler (8 ranks on 2 cores: a 256 KiB staged call from 1 to
    // 12 ms, and 0.7 s to measure). Single copy lost 20-30% to staged at 4 ranks on 2 cores.
    // What a test pretends is decided as on a node with a cpu per rank.
    const std::string why = "unmeasured: " + std::to_string(placement_.node_ranks.size()) +
                            " ranks on " + std::to_string(placement_.node_cpus()) + " cpus";
    if (measure_slots && config.pretend.slots == CalibrationPretend::Slots::measured) {
      measure_slots = false;
      slots_origin = why;
    }
    if (measure_single_copy &&
        config.pretend.allreduce_single_copy == CalibrationPretend::AllreduceSingleCopy::measured) {
      measure_single_copy = false;
      single_copy_origin = why;
      tuning_.single_copy_allreduce_from = 0;
    }
  }
  if (!unmeasured.empty()) {
    if (measure_slots) slots_origin = unmeasured;
    if (measure_single_copy) single_copy_origin = unmeasured;
  } else if (measure_slots || measure_single_copy) {
    const std::vector<int>& node_ranks = placement_.node_ranks;
    auto node = make_communicator(node_ranks, placement_.local_rank(job_.rank()), 0, 1);
    collectives::Policy policy = node->policy();
    policy.check_calls = false;  // every rank makes the same calls by construction
    policy.bcast_algorithm.clear();
    node->set_policy(std::move(policy));
    const NodeCalibration measured =
        calibrate_node(*this, *node, tuning_, measure_slots, measure_single_copy, config.pretend);
    tuning_ = measured.tuning;
    if (measure_slots) slots_origin = measured.slots_summary;
    if (measure_single_copy) {
      single_copy_origin = measured.single_copy_summary.empty() ? "unused: " + single_copy_off_
                                                                : measured.single_copy_summary;
    }
  }
  const std::string lines =
      "IBCOLL_ALLREDUCE_SLOTS_MAX=" + size_text(tuning_.slots_allreduce_max) + " (" + slots_origin +
      ")\nIBCOLL_ALLREDUCE_SINGLE_COPY_FROM=" + size_text(tuning_.single_copy_allreduce_from) +
      " (" + single_copy_origin + ")\n";
  IBCOLL_LOG(info, lines.substr(0, lines.size() - 1));
  thresholds_ += lines;
}

Context::~Context() {
  // No rank may tear down its transports while a peer still needs them (a message it sent
  // may still be on the wire), so the last step is a barrier of the whole job; unless a rank is
  // known gone, which would leave the barrier waiting for it until the deadline. A world call
  // that returned early ends first: the barrier moves no message of its. The host library's
  // progress is not called from here on (an MPI library finalizing holds none of its locks).
  poll_also(nullptr);
  try {
    if (world_) {
      if (Status s = settle(*world_); !s.ok()) IBCOLL_LOG(warn, s.message());
    }
    if ((channel_ && channel_->any_rank_gone()) || a_node_rank_exited()) {
      IBCOLL_LOG(warn, "leaving without a barrier: a rank of the job is gone");
      job_.bootstrap().leave_without_everyone();
    } else {
      job_.bootstrap().barrier("finalize");
    }
  } catch (const Error& e) {
    IBCOLL_LOG(warn, "leaving without every rank: " << e.what());
  }
  job_.engine().remove(channel_.get());
}

// A rank of this node whose process has exited: a call's own liveness check finds one (the
// slots' waits), which the channels need not have heard of. A PMIx fence would wait for it.
// Or one that left the node's shared memory for want of room (this one too): the others left
// without a barrier once they heard of it.
bool Context::a_node_rank_exited() const {
  if (!shm_) return false;
  if (shm_->a_rank_left()) return true;
  const transport::shm::SlotRegion& slots = shm_->slots();
  for (int local = 0; local < slots.local_ranks(); ++local) {
    if (!slots.alive(local)) return true;
  }
  return false;
}

TransportMode Context::remote_transport() {
  const bool have_verbs =
#ifdef IBCOLL_HAVE_VERBS
      !transport::verbs::active_device_names().empty();
#else
      false;
#endif
  // One exchange: a rank without a device would otherwise wait for verbs handshakes forever.
  const std::vector<std::string> all = exchange_set_up(
      job_.bootstrap(), "remote-transport", [&] { return std::string(have_verbs ? "v" : "-"); });
  const auto without = std::find(all.begin(), all.end(), "-");
  if (without == all.end()) return TransportMode::verbs;
#ifdef IBCOLL_HAVE_UCX
  if (job_.rank() == 0) {
    IBCOLL_LOG(info, "rank " << (without - all.begin())
                             << " has no active verbs device: the job goes between nodes by UCX");
  }
  return TransportMode::ucx;
#else
  throw Error(
      Code::not_supported,
      "rank " + std::to_string(without - all.begin()) +
          " has no active verbs device, and this build has no UCX transport to use instead");
#endif
}

void Context::open_transports() {
  const Config& config = job_.config();
  placement_ = exchange_placement(job_.bootstrap(), config);
  const std::string& node = placement_.node;
  const std::vector<int>& node_ranks = placement_.node_ranks;
  const bool one_node = static_cast<int>(node_ranks.size()) == job_.size();
  if (config.transport == TransportMode::shm && !one_node) {
    throw Error(Code::invalid_argument,
                "IBCOLL_TRANSPORT: shm needs every rank on one node, and this job spans nodes");
  }
  const bool use_shm =
      config.transport == TransportMode::shm || config.transport == TransportMode::automatic;
  // Forced (also inside the node), or between nodes.
  const TransportMode remote = config.transport == TransportMode::automatic
                                   ? (one_node ? TransportMode::shm : remote_transport())
                                   : config.transport;
  if (use_shm) {
    OpenedShm opened = open_shm_channel(job_, node_ranks, node);
    shm_ = std::move(opened.channel);
    single_copy_off_ = std::move(opened.single_copy_off);
    if (node_ranks.size() == 1) shm_.reset();  // nobody to share with
  }
  thresholds_ = "IBCOLL_SHM_SINGLE_COPY=" +
                (shm_ ? shm_->single_copy().text() + " (" + shm_->single_copy_origin() + ")"
                      : std::string("unused (no other rank shares this node)")) +
                "\n";
  IBCOLL_LOG(info, thresholds_.substr(0, thresholds_.size() - 1));
  transport::Channel* between = nullptr;  // what reaches the ranks shared memory does not
  if (remote == TransportMode::verbs) {
#ifdef IBCOLL_HAVE_VERBS
    verbs_ = open_verbs_channel(job_, placement_);
    between = verbs_.get();
#else
    throw Error(Code::not_supported,
                "IBCOLL_TRANSPORT: this build has no verbs transport, and verbs was asked for");
#endif
  } else if (remote == TransportMode::ucx) {
#ifdef IBCOLL_HAVE_UCX
    ucx_ = open_ucx_channel(job_);
    between = ucx_.get();
#else
    throw Error(Code::not_supported,
                "IBCOLL_TRANSPORT: this build has no UCX transport (IBCOLL_WITH_UCX was off), and "
                "ucx was asked for");
#endif
  }
  std::vector<transport::RoutedChannel::Route> routes(static_cast<size_t>(job_.size()));
  for (int r = 0; r < job_.size(); ++r) {
    auto local = std::find(node_ranks.begin(), node_ranks.end(), r);
    if (r == job_.rank()) continue;
    if (shm_ && local != node_ranks.end()) {
      routes[static_cast<size_t>(r)] = {shm_.get(), static_cast<int>(local - node_ranks.begin())};
    } else {
      routes[static_cast<size_t>(r)] = {between, r};
    }
  }
  std::vector<transport::Channel*> channels;
  if (shm_) channels.push_back(shm_.get());
  if (between) channels.push_back(between);
  channel_ = std::make_unique<transport::RoutedChannel>(job_.rank(), std::move(routes),
                                                        std::move(channels));
  channel_->listen(this);
  job_.engine().add(channel_.get());
  if (placement_.oversubscribed()) {
    job_.engine().set_spin_polls(transport::ProgressEngine::kOversubscribedSpinPolls);
    IBCOLL_LOG(info, node_ranks.size() << " ranks on " << placement_.node_cpus()
                                       << " cpus: waits yield the core after a short spin");
  }
  const size_t by_shm = shm_ ? node_ranks.size() - 1 : 0;
  IBCOLL_LOG(info, "node " << node << ": shm to " << by_shm << " ranks, "
                           << (remote == TransportMode::ucx ? "UCX" : "verbs") << " to "
                           << (job_.size() - 1 - static_cast<int>(by_shm)) << " (IBCOLL_TRANSPORT="
                           << transport_mode_name(config.transport) << ")");
}

const char* Context::transport_to(int rank) const {
  if (rank == job_.rank()) return "self";
  const transport::Channel* c = channel_->channel_of(rank);
  if (c == shm_.get()) return "shm";
#ifdef IBCOLL_HAVE_UCX
  if (c == ucx_.get()) return "ucx";
#endif
  return "verbs";
}

Context::Counters Context::counters() const {
  Counters c;
  if (shm_) {
    c.shm_sent = channel_->sent_through(*shm_);
    c.shm_segment_bytes = shm_->segment().size();
    c.shm_resident_bytes = shm_->segment().resident_bytes();
  }
#ifdef IBCOLL_HAVE_VERBS
  if (verbs_) {
    c.verbs_sent = channel_->sent_through(*verbs_);
    const auto verbs = verbs_->counters();
    c.verbs_connections = verbs.connections;
    c.registration_hits = verbs.registration_hits;
    c.registration_misses = verbs.registration_misses;
    c.registrations_unmapped = verbs.registrations_unmapped;
  }
#endif
#ifdef IBCOLL_HAVE_UCX
  if (ucx_) {
    c.ucx_sent = channel_->sent_through(*ucx_);
    c.ucx_endpoints = ucx_->counters().endpoints;
  }
#endif
  return c;
}

std::unique_ptr<Request> Context::start(Communicator& communicator, Collective collective,
                                        const collectives::CollectiveArgs& args, uint64_t extra) {
  try {
    return std::make_unique<Request>(*this, communicator.start(collective, args, extra));
  } catch (const Error& e) {
    throw refused(e);
  }
}

Status Context::run(Communicator& communicator, Collective collective,
                    const collectives::CollectiveArgs& args) {
  const collectives::PreparedCall call = [&] {
    try {
      return communicator.prepare(collective, args);
    } catch (const Error& e) {
      throw refused(e);
    }
  }();
  if (call.runs_here()) {
    Status outcome = call.algorithm.run_here(
        call.group, call.args, call.tag,
        [this, &communicator](FunctionRef<bool()> done, FunctionRef<std::string()> describe) {
          // Named for a hang report while it runs. Several run at once when their waits let
          // other threads in (an MPI library's lock is released around its progress), and end
          // in any order: each takes out its own entry.
          struct Running {
            Context& c;
            const FunctionRef<std::string()>* describe;
            ~Running() { std::erase(c.running_here_, describe); }
          } running{*this, &describe};
          running_here_.push_back(&describe);
          const collectives::Revocation& revocation = *communicator.revocation();
          drive_until(
              [&] {
                if (revocation.revoked()) throw Error(revocation.why());
                return done();
              },
              describe);
        });
    pass_word_on(outcome);
    return outcome;
  }
  Request request(*this, communicator.start(call));
  request.operation().return_early();
  const Status outcome = wait(request);
  if (request.operation().state() == collectives::Operation::State::running) {
    communicator.hold(std::move(request.operation_));  // it returned early and runs on
    if (std::find(holders_.begin(), holders_.end(), &communicator) == holders_.end())
      holders_.push_back(&communicator);
  }
  return outcome;
}

Status Context::settle(Communicator& communicator) {
  std::erase(holders_, &communicator);
  collectives::Operation* held = communicator.held();
  if (!held) return {};
  Status outcome;
  try {
    drive_until([&] { return held->advance() != collectives::Operation::State::running; },
                [&] { return held->describe(); });
    outcome = held->status();
  } catch (const Error& e) {
    outcome = e.status();
  }
  communicator.drop_held();
  if (outcome.ok()) return outcome;
  return collectives::reported_later("this rank's last call on the communicator", outcome);
}

void Context::advance_all() {
  if (hang_report_requested()) {
    write_hang_report(job_.config().hang_report, job_.rank(), calls_in_flight());
  }
  probe_roster_.serve_all();
  for (Request* r : in_flight_)
    r->operation().advance();
  for (HeldAgreement& held : agreements_)
    held.agreement->advance();
}

std::vector<std::string> Context::calls_in_flight() const {
  std::vector<std::string> calls;
  for (const FunctionRef<std::string()>* describe : running_here_)
    calls.push_back((*describe)());
  for (const Request* r : in_flight_) {
    if (!r->done()) calls.push_back(r->operation_->describe());
  }
  for (Communicator* c : holders_) {
    if (c->held()) calls.push_back(c->held()->describe() + " (returned early; it runs on)");
  }
  for (const HeldAgreement& held : agreements_) {
    if (!held.agreement->ended()) calls.push_back(held.agreement->describe());
  }
  return calls;
}

// Every so many progress() calls: a clock read starts a polled request's deadline, or ends it.
void Context::expire_polled_requests() {
  const auto now = std::chrono::steady_clock::now();
  const auto timeout = job_.config().timeout;
  for (Request* r : in_flight_) {
    if (r->done()) continue;
    if (!r->deadline_) {
      r->deadline_ = now + timeout;
    } else if (now > *r->deadline_) {
      r->operation().abandon(Status(
          Code::timeout, r->operation().describe() + "; it did not complete within " +
                             std::to_string(timeout.count()) + " ms of polling (IBCOLL_TIMEOUT)"));
    }
  }
}

void Context::poll_also(std::function<int()> poll) {
  if (external_progress_) job_.engine().remove(external_progress_.get());
  external_progress_.reset();
  if (!poll) return;
  external_progress_ = std::make_unique<transport::FunctionPoller>(std::move(poll));
  job_.engine().add(external_progress_.get());
}

int Context::progress() {
  constexpr uint32_t kProgressCallsPerClockRead = 64;
  const int events = job_.engine().progress();
  advance_all();
  if (++progress_calls_ % kProgressCallsPerClockRead == 0) expire_polled_requests();
  return events;
}

void Context::drive_until(FunctionRef<bool()> done, FunctionRef<std::string()> describe) {
  try {
    job_.engine().wait(
        [&] {
          advance_all();
          return done();
        },
        job_.config().timeout, "collective");
  } catch (const Error& e) {
    if (e.status().code() != Code::timeout) throw;
    throw Error(Code::timeout, describe() + "; it did not complete within " +
                                   std::to_string(job_.config().timeout.count()) +
                                   " ms (IBCOLL_TIMEOUT)");
  }
}

const Status& Context::wait(Request& request) {
  try {
    drive_until([&] { return request.done(); }, [&] { return request.operation().describe(); });
  } catch (const Error& e) {
    request.operation().abandon(e.status());
  }
  pass_word_on(request.status());
  return request.status();
}

std::unique_ptr<Communicator> Context::split(Communicator& parent, int color, int key) {
  return create_group(parent, color, key, 0);
}

std::unique_ptr<Communicator> Context::create(Communicator& parent, std::span<const int> ranks) {
  check_rank_list(ranks, parent.size());
  const auto position = std::find(ranks.begin(), ranks.end(), parent.rank());
  const bool member = position != ranks.end();
  return create_group(parent, member ? 0 : -1,
                      member ? static_cast<int>(position - ranks.begin()) : 0, digest_of(ranks));
}

// Every parent rank contributes (color, key, its next free id, its stamp) in its own row of a
// table that a sum-allreduce fills in everywhere. The new id is the largest next free id of any
// parent rank, so it is free on every member; where that is past the largest id (a member
// holds a high one), a second allreduce ORs the parent ranks' held ids and the lowest free on
// all is taken. The stamp is the largest.
std::unique_ptr<Communicator> Context::create_group(Communicator& parent, int color, int key,
                                                    uint64_t extra) {
  constexpr size_t kColumns = 4;
  const auto n = static_cast<size_t>(parent.size());
  const auto me = static_cast<size_t>(parent.rank());
  std::vector<int64_t> table(kColumns * n, 0), all(kColumns * n, 0);
  table[kColumns * me] = color;
  table[kColumns * me + 1] = key;
  table[kColumns * me + 2] = ids_.next();
  table[kColumns * me + 3] = static_cast<int64_t>(ids_.stamp());
  const auto run_on_parent = [&](const void* in, void* out, size_t count,
                                 collectives::DataType type, collectives::ReduceOp op) {
    collectives::PreparedCall call =
        parent.prepare(Collective::allreduce, {in, out, count, type, op, 0}, extra);
    // Its outcome is the table's alone, so that every rank comes out with the same
    // communicator: a failure of a call that returned early before it is left for the parent's
    // next call.
    call.follows_held = false;
    Request request(*this, parent.start(call));
    if (const Status& s = wait(request); !s.ok()) throw Error(s);
  };
  run_on_parent(table.data(), all.data(), table.size(), collectives::DataType::int64,
                collectives::ReduceOp::sum);
  int64_t id = 0, stamp = 0;
  for (size_t r = 0; r < n; ++r) {
    id = std::max(id, all[kColumns * r + 2]);
    stamp = std::max(stamp, all[kColumns * r + 3]);
  }
  if (id > static_cast<int64_t>(ids_.largest())) {
    const std::vector<uint64_t> mine = ids_.held_bitmap();
    std::vector<uint64_t> anywhere(mine.size());
    run_on_parent(mine.data(), anywhere.data(), mine.size(), collectives::DataType::uint64,
                  collectives::ReduceOp::bor);
    id = ids_.lowest_clear(anywhere);
    if (id == 0) {
      throw Error(Code::system_error, "communicator: all " + std::to_string(ids_.largest() - 1) +
                                          " communicator ids are held by live communicators");
    }
  }
  ids_.see(static_cast<uint64_t>(stamp));
  if (color < 0) return nullptr;
  std::vector<size_t> chosen;
  for (size_t r = 0; r < n; ++r) {
    if (all[kColumns * r] == color) chosen.push_back(r);
  }
  std::stable_sort(chosen.begin(), chosen.end(), [&](size_t a, size_t b) {
    return all[kColumns * a + 1] < all[kColumns * b + 1];
  });
  std::vector<int> members;
  int rank = 0;
  for (size_t r : chosen) {
    if (r == me) rank = static_cast<int>(members.size());
    members.push_back(parent.members()[r]);
  }
  return holding(static_cast<uint32_t>(id), static_cast<uint64_t>(stamp), [&] {
    return make_communicator(std::move(members), rank, static_cast<uint16_t>(id),
                             static_cast<uint64_t>(stamp));
  });
}

std::unique_ptr<Communicator> Context::from_ranks(std::span<const int> ranks, uint32_t id,
                                                  uint64_t stamp) {
  check_rank_list(ranks, job_.size());
  const auto position = std::find(ranks.begin(), ranks.end(), job_.rank());
  const int rank = position == ranks.end() ? -1 : static_cast<int>(position - ranks.begin());
  if (rank < 0) {
    throw Error(Code::invalid_argument,
                "ranks: this process (rank " + std::to_string(job_.rank()) + ") is not listed");
  }
  return holding(id, stamp, [&] {
    return make_communicator({ranks.begin(), ranks.end()}, rank, static_cast<uint16_t>(id), stamp);
  });
}

std::unique_ptr<Communicator> Context::like(const Communicator& like, uint32_t id, uint64_t stamp) {
  return holding(id, stamp, [&] {
    return make_communicator(like.membership(), static_cast<uint16_t>(id), stamp);
  });
}

void Context::release(Communicator& communicator, bool abandoned) {
  const uint64_t key = communicator.revocation()->key();
  bool kept = false;
  for (HeldAgreement& held : agreements_) {
    if (held.agreement->key() != key) continue;
    held.freed_at = std::chrono::steady_clock::now();
    kept = true;
  }
  if (abandoned) communicator.abandon_slots();
  // Its agreements stay a while, under tags of its id: the id is not free here until they go,
  // so that no later communicator of this rank takes it (and their messages).
  if (kept) {
    ids_kept_for_agreements_.push_back({key, communicator.id(), communicator.next_sequence()});
  } else {
    ids_.release(communicator.id(), communicator.next_sequence());
  }
  forget_agreements(key, 0);
}

std::optional<collectives::SlotGroup> Context::slot_group(const std::vector<int>& members,
                                                          uint16_t id, uint64_t stamp) {
  // A communicator of one (MPI_COMM_SELF) needs no set: its calls move nothing.
  if (!shm_ || !job_.config().shm_slots || members.size() < 2) return std::nullopt;
  collectives::SlotGroup group;
  group.region = &shm_->slots();
  for (int member : members) {  // ends at the first member off the node
    if (member != job_.rank() && channel_->channel_of(member) != shm_.get()) return std::nullopt;
    group.local_ranks.push_back(placement_.local_rank(member));
    group.job_ranks.push_back(member);
  }
  group.seen_ready.resize(members.size());
  group.binding = transport::shm::SlotBinding(shm_->slots(), id, stamp, group.local_ranks,
                                              placement_.local_rank(job_.rank()));
  if (group.binding.set() == transport::shm::SlotRegion::kNoSet) {
    if (!said_no_slot_set_) {
      if (group.binding.lacked_room()) {
        IBCOLL_LOG(warn, "communicator " << id
                                         << " runs without the slots: the node's shared memory "
                                            "(/dev/shm) had no room for a slot set");
      } else {
        IBCOLL_LOG(warn, "communicator " << id << " and others run without the slots: all "
                                         << transport::shm::SlotRegion::kSets
                                         << " slot sets of this node are held");
      }
      said_no_slot_set_ = true;
    }
    return std::nullopt;
  }
  group.id = id;
  return group;
}

}  // namespace ibcoll::runtime
