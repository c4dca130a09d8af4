// Context: everything one process of a job owns: the job (configuration, bootstrap, progress
// engine), its transports behind one routed channel (shared memory to ranks on its node, verbs
// to the others or UCX where some node has no verbs device, or one of them when
// IBCOLL_TRANSPORT says), the world communicator, and the
// collective calls in flight, which progress() and wait() advance all together (a peer may
// need any of them to move).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "collectives/agreement.h"
#include "collectives/communicator.h"
#include "runtime/communicator_ids.h"
#include "runtime/job.h"
#include "runtime/placement.h"
#include "transport/routed_channel.h"
#include "transport/shm/shm_channel.h"
#ifdef IBCOLL_HAVE_UCX
#include "transport/ucx/ucx_channel.h"
#endif
#ifdef IBCOLL_HAVE_VERBS
#include "transport/verbs/verbs_channel.h"
#endif

namespace ibcoll::runtime {

class Context;

// A collective call in flight, advanced by its context until it ends.
class Request {
 public:
  Request(Context& context, std::unique_ptr<collectives::Operation> operation);
  ~Request();
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  // Its caller has it back (Operation::returned).
  bool done() const { return operation_->returned(); }
  const Status& status() const { return operation_->status(); }
  collectives::Operation& operation() { return *operation_; }

 private:
  friend class Context;
  Context& context_;
  std::unique_ptr<collectives::Operation> operation_;
  // For a request driven by progress() (test-polling) rather than wait(): when it times out.
  std::optional<std::chrono::steady_clock::time_point> deadline_;
};

class Context : private transport::RoutedChannel::Listener {
 public:
  Context();  // from the environment; throws Error naming what is wrong
  // With the caller's bootstrap (rank and size come from it). Collective.
  explicit Context(std::unique_ptr<Bootstrap> bootstrap);
  ~Context();

  collectives::Communicator& world() { return *world_; }
  // "shm", "verbs", "ucx" or "self": how this process reaches `rank` of the job.
  const char* transport_to(int rank) const;
  struct Counters {
    uint64_t verbs_connections = 0;
    transport::RoutedChannel::Traffic verbs_sent, shm_sent, ucx_sent;
    uint64_t ucx_endpoints = 0;
    uint64_t shm_segment_bytes = 0, shm_resident_bytes = 0;
    // verbs' registration cache: look-ups it answered, those it registered for, and entries it
    // dropped because their memory was unmapped.
    uint64_t registration_hits = 0, registration_misses = 0, registrations_unmapped = 0;
  };
  // What the transports have done since the start (ibcoll_get_counters).
  Counters counters() const;
  // The thresholds this process runs with that the machine decides, a line each:
  // "VARIABLE=value (where the value came from)" (ibcoll_thresholds).
  const std::string& thresholds() const { return thresholds_; }

  // Collective over `parent`: members with the same color (≥ 0) form a communicator, ordered
  // by key, then parent rank. Null for a negative color.
  std::unique_ptr<collectives::Communicator> split(collectives::Communicator& parent, int color,
                                                   int key);
  // Collective over `parent`, every rank passing the same list of parent ranks: the listed
  // ranks form a communicator in list order; null elsewhere.
  std::unique_ptr<collectives::Communicator> create(collectives::Communicator& parent,
                                                    std::span<const int> ranks);
  // For a caller that agrees on communicators by its own means (an MPI library): the ids and
  // stamps (runtime/communicator_ids.h), and from_ranks (not collective), the communicator of
  // `ranks` (job ranks, this one among them) with `id` and `stamp`, which every member passes
  // alike: an id free on every member, and the members' largest stamp.
  CommunicatorIds& ids() { return ids_; }
  std::unique_ptr<collectives::Communicator> from_ranks(std::span<const int> ranks, uint32_t id,
                                                        uint64_t stamp);
  // from_ranks with the members of `like`, in its order, whose Membership it shares: nothing of
  // it grows with the members (an MPI library's duplicate).
  std::unique_ptr<collectives::Communicator> like(const collectives::Communicator& like,
                                                  uint32_t id, uint64_t stamp);
  // Before a communicator of split, create, from_ranks or like goes (after settle): its id is free
  // again. `abandoned`: it was given up before every member made it (an agreement that failed),
  // so the members of this node that did not make it never will.
  void release(collectives::Communicator& communicator, bool abandoned = false);

  // Starts a collective call (arguments checked first: Error(invalid_argument)).
  std::unique_ptr<Request> start(collectives::Communicator& communicator,
                                 collectives::Collective collective,
                                 const collectives::CollectiveArgs& args, uint64_t extra = 0);
  // start() + wait(): a blocking call.
  Status run(collectives::Communicator& communicator, collectives::Collective collective,
             const collectives::CollectiveArgs& args);
  // Also calls `poll` (a host library's progress) in every progress round and wait; null
  // stops that.
  void poll_also(std::function<int()> poll);
  // Polls the transports once and advances every call in flight; the number of events. A
  // request polled this way for longer than IBCOLL_TIMEOUT ends with a timeout.
  int progress();
  // Drives progress until `request` ends; after IBCOLL_TIMEOUT it ends it with a timeout.
  const Status& wait(Request& request);
  // Before `communicator` goes: drives the call it holds that returned early
  // (Communicator::hold) to its end, within IBCOLL_TIMEOUT (past that, gives it up); that
  // call's failure, which no later call will report. A communicator that may hold one is
  // settled before it goes: ibcoll_comm_free does, and finalize for the world (node
  // calibration's communicator makes unchecked allreduces only, which never return early).
  Status settle(collectives::Communicator& communicator);
  // Revokes `communicator` for every member (ibcoll_comm_revoke): its calls in flight and later
  // fail with Code::revoked here and, once the word reaches them, on every member.
  void revoke(collectives::Communicator& communicator);
  // A call that ends with `outcome` goes back to its caller, who may leave the library for long:
  // when its communicator was revoked, the word this rank passes on leaves the process first.
  void pass_word_on(const Status& outcome);
  // What a call refused before it starts (its communicator revoked or failed, a member gone)
  // returns: the word of a revocation leaves first, and the transports are polled once, so that
  // a rank whose calls all fail so still hears that it was fenced out, and says so then.
  Error refused(const Error& e);
  // Collective over the live members of `communicator`, revoked or not, whatever fails meanwhile
  // (ibcoll_comm_agree): the fold of the members' `mine` and the members held failed, the same
  // on every member it returns on (collectives/agreement.h); the communicator keeps that set
  // (agreed_failed). Error(fenced) where this rank was fenced out, Error(mismatch) where a member
  // made another kind of agreement call.
  collectives::AgreementDecision agree(collectives::Communicator& communicator,
                                       collectives::Agreement::Fold fold,
                                       std::vector<uint64_t> mine);
  // Collective over the live members (ibcoll_comm_shrink): a new communicator of those the
  // agreement did not hold failed, in their order, with an id free on each and their largest
  // stamp; the connections to them are the ones this process has.
  std::unique_ptr<collectives::Communicator> shrink(collectives::Communicator& communicator);

 private:
  friend class Request;
  void advance_all();
  // Advances every call in flight and polls the transports until done(); after IBCOLL_TIMEOUT
  // Error(timeout) whose message is what `describe` says (the call and what it waits for).
  void drive_until(FunctionRef<bool()> done, FunctionRef<std::string()> describe);
  // Every call in flight and what it waits for (a hang report, on SIGUSR1).
  std::vector<std::string> calls_in_flight() const;
  void expire_polled_requests();
  // The constructors' common part, once the job is there.
  void open_transports_and_world();
  void open_transports();
  // What carries messages between nodes: verbs, or UCX where some rank of the job has no verbs
  // device (IBCOLL_TRANSPORT=auto; every rank decides alike).
  TransportMode remote_transport();
  void tune_node();
  // IBCOLL_CONNECT=planned: starts the handshakes with the remote peers the connection plan
  // gives this rank, so that its first calls find them connected (any other: on first use).
  void connect_planned_peers();
  bool a_node_rank_exited() const;
  // Drives progress until no notice waits to leave (a connection to make), within one
  // IBCOLL_KEEPALIVE interval.
  void send_out_notices();
  // RoutedChannel::Listener: a member's word that a communicator is revoked, or that it is
  // alive in an agreement.
  void heard(int teller, const transport::Notice& notice) override;
  // Agreements that have decided stay for the members that decide later (early return), until
  // a later agreement of their communicator decides, or IBCOLL_TIMEOUT after it is freed (the
  // last kFreedAgreementsKept freed at most), when their communicator's id is free again.
  void forget_agreements(uint64_t key, uint32_t before);
  // Where the word of a revoked communicator finds it: every communicator made here is listed.
  void list_revocable(const collectives::Communicator& communicator);
  std::unique_ptr<collectives::Communicator> make_communicator(std::vector<int> members, int rank,
                                                               uint16_t id, uint64_t stamp);
  std::unique_ptr<collectives::Communicator> make_communicator(
      std::shared_ptr<const collectives::Membership> membership, uint16_t id, uint64_t stamp);
  // A communicator of `id` held with `stamp` (ids_.hold; Error(invalid_argument) for stamp 0),
  // made by `make`; the id goes back when it cannot be made.
  std::unique_ptr<collectives::Communicator> holding(
      uint32_t id, uint64_t stamp, FunctionRef<std::unique_ptr<collectives::Communicator>()> make);
  std::unique_ptr<collectives::Communicator> create_group(collectives::Communicator& parent,
                                                          int color, int key, uint64_t extra);
  // The slot set of a communicator of these job ranks with this id, when it can have one (all
  // of them reached through this node's shared memory, a set free when its first member on the
  // node bound it).
  std::optional<collectives::SlotGroup> slot_group(const std::vector<int>& members, uint16_t id,
                                                   uint64_t stamp);

  Job job_;
  Placement placement_;  // this node's ranks, their cpus, its topology
  std::unique_ptr<transport::shm::ShmChannel> shm_;
  std::string thresholds_;
  std::string single_copy_off_;     // why the node's single copy is off, in words (OpenedShm)
  bool said_no_slot_set_ = false;   // the warning that the node's slot sets are all held
  collectives::NodeTuning tuning_;  // this node's, for communicators inside it
#ifdef IBCOLL_HAVE_VERBS
  std::unique_ptr<transport::verbs::VerbsChannel> verbs_;
#endif
#ifdef IBCOLL_HAVE_UCX
  std::unique_ptr<transport::ucx::UcxChannel> ucx_;
#endif
  std::unique_ptr<transport::RoutedChannel> channel_;
  collectives::ProbeRoster probe_roster_;  // outlives every communicator's desk
  std::unique_ptr<collectives::Communicator> world_;
  CommunicatorIds ids_;
  // By key, the communicators' revocations (those freed expire); and the keys revoked by word
  // before this rank made their communicator, which is revoked as it is made.
  std::unordered_map<uint64_t, std::weak_ptr<collectives::Revocation>> revocations_;
  std::unordered_map<uint64_t, int> revoked_before_made_;
  struct HeldAgreement {
    std::unique_ptr<collectives::Agreement> agreement;
    std::optional<std::chrono::steady_clock::time_point> freed_at;  // its communicator's free
  };
  std::vector<HeldAgreement> agreements_;
  // The ids of freed communicators whose agreements stay, released once those go.
  struct KeptId {
    uint64_t key;
    uint32_t id;
    uint64_t next_sequence;
  };
  std::vector<KeptId> ids_kept_for_agreements_;
  std::vector<Request*> in_flight_;
  // The blocking calls run on their callers' stacks (not Requests), while they run: their
  // descriptions.
  std::vector<const FunctionRef<std::string()>*> running_here_;
  // Communicators that have held a call that returned early, until settled: the hang report
  // lists the call each one holds now (one its next call took over is that call's to show).
  std::vector<collectives::Communicator*> holders_;
  uint32_t progress_calls_ = 0;
  std::unique_ptr<transport::FunctionPoller> external_progress_;
};

}  // namespace ibcoll::runtime
