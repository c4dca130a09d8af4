#include "runtime/connection_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <utility>

#include "base/size_text.h"
#include "transport/channel.h"
#include "transport/shm/ring.h"
#include "transport/shm/shm_channel.h"
#include "transport/shm/slot_region.h"
#ifdef IBCOLL_HAVE_VERBS
#include "transport/verbs/connection_manager.h"
#include "transport/verbs/credit_ledger.h"
#include "transport/verbs/verbs_channel.h"
#endif

namespace ibcoll::runtime {
namespace {

using collectives::Collective;

// One rank's view of the virtual job: every send completes, every receive completes full (its
// bytes are whatever the buffer held: the algorithms' steps do not depend on the data), and the
// peers of both are recorded.
class RecordingChannel final : public transport::Channel {
 public:
  RecordingChannel(int rank, int size) : rank_(rank), size_(size) {}
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  size_t max_message_size() const override { return size_t{1} << 32; }  // as verbs
 private:  // reached through Channel::send and recv, which check the arguments
  void post_send(int peer, uint64_t, const void*, size_t length,
                 transport::Completion done) override {
    peers_.insert(peer);
    done_.emplace_back(std::move(done), length);
  }
  void post_recv(int peer, uint64_t, void*, size_t capacity, transport::Completion done) override {
    peers_.insert(peer);
    done_.emplace_back(std::move(done), capacity);
  }

 public:
  int poll() override {
    int events = 0;
    while (!done_.empty()) {  // a completion may post more
      auto [done, bytes] = std::move(done_.front());
      done_.pop_front();
      done(Status(), bytes);
      ++events;
    }
    return events;
  }
  void cancel(uint64_t, uint64_t) override { done_.clear(); }
  const Status* peer_failure(int) const override { return nullptr; }
  void tell(int, const transport::Notice&) override {}
  void tell_peers(const transport::Notice&) override {}

  const std::set<int>& peers() const { return peers_; }
  void forget_peers() { peers_.clear(); }

 private:
  int rank_, size_;
  std::set<int> peers_;
  std::deque<std::pair<transport::Completion, size_t>> done_;
};

void run_to_end(collectives::Operation& operation, RecordingChannel& channel) {
  // The check of a call whose messages carried no real signatures ends in a mismatch: its
  // messages were all exchanged by then, which is what is recorded here.
  for (int idle = 0; operation.advance() == collectives::Operation::State::running;) {
    idle = channel.poll() == 0 ? idle + 1 : 0;
    if (idle > 1000) {
      throw Error(Code::internal, "planning: the call stopped: " + operation.describe());
    }
  }
}

// The peers one rank talks to in a call, as a real call would: its call check, then its
// algorithm (or the algorithm that is its own check).
std::set<int> peers_of(collectives::Communicator& communicator, RecordingChannel& channel,
                       Collective collective, size_t bytes, int root, float* send, float* recv,
                       const char** algorithm) {
  collectives::CollectiveArgs args;
  args.send = send;
  args.recv = recv;
  args.root = root;
  if (collective == Collective::allreduce) {
    args.count = bytes / sizeof(float);
    args.type = collectives::DataType::float32;
  } else {
    args.count = bytes;
    args.type = collectives::DataType::uint8;
  }
  channel.forget_peers();
  const collectives::PreparedCall call = communicator.prepare(collective, args);
  *algorithm = call.algorithm.name;
  run_to_end(*communicator.start(call), channel);
  if (call.checked && !call.self_checking()) {
    collectives::PreparedCall algorithm_alone = call;  // its check failed: run it unchecked
    algorithm_alone.checked = false;
    run_to_end(*communicator.start(algorithm_alone), channel);
  }
  return channel.peers();
}

PeerCount count_peers(const std::set<int>& peers, int rank, const topo::Hierarchy& hierarchy) {
  PeerCount count;
  std::set<int> nodes;
  for (int peer : peers) {
    if (hierarchy.node_index(peer) == hierarchy.node_index(rank)) {
      ++count.local;
    } else {
      ++count.remote;
      nodes.insert(hierarchy.node_index(peer));
    }
  }
  count.remote_nodes = static_cast<int>(nodes.size());
  return count;
}

void keep_most(PeerCount& most, const PeerCount& count) {
  most.local = std::max(most.local, count.local);
  most.remote = std::max(most.remote, count.remote);
  most.remote_nodes = std::max(most.remote_nodes, count.remote_nodes);
}

// Ranks (or roots) to plan: all of a small job; else local indices 0, 1, the middle and the
// last on the first, a middle and the last node.
std::vector<int> sample(const topo::Hierarchy& hierarchy, int exhaustive_up_to) {
  std::vector<int> out;
  if (hierarchy.size() <= exhaustive_up_to) {
    for (int rank = 0; rank < hierarchy.size(); ++rank)
      out.push_back(rank);
    return out;
  }
  const auto& nodes = hierarchy.nodes();
  std::set<int> picked;
  for (size_t node : {size_t{0}, nodes.size() / 2, nodes.size() - 1}) {
    const std::vector<int>& members = nodes[node];
    for (size_t local : {size_t{0}, size_t{1}, members.size() / 2, members.size() - 1})
      if (local < members.size()) picked.insert(members[local]);
  }
  return {picked.begin(), picked.end()};
}

std::vector<CallPlan> calls_of(const std::vector<size_t>& sizes) {
  std::vector<CallPlan> calls;
  for (Collective collective : {Collective::allreduce, Collective::bcast})
    for (size_t bytes : sizes)
      calls.push_back({collective, bytes, "", {}});
  return calls;
}

// The peers `rank` talks to in each of `calls` (a bcast from each of `roots`), each run as a
// real call runs; each call's algorithm is noted in it.
std::vector<std::set<int>> peers_in_calls(int rank, const topo::Hierarchy& hierarchy,
                                          const collectives::Policy& policy,
                                          std::vector<CallPlan>& calls,
                                          const std::vector<int>& roots) {
  size_t largest = 0;
  for (const CallPlan& call : calls)
    largest = std::max(largest, call.bytes);
  // Left as they come: the calls' steps do not depend on the data, and pages never written
  // cost nothing.
  const std::unique_ptr<float[]> send(new float[largest / sizeof(float) + 1]);
  const std::unique_ptr<float[]> recv(new float[largest / sizeof(float) + 1]);
  std::vector<int> members(static_cast<size_t>(hierarchy.size()));
  for (int member = 0; member < hierarchy.size(); ++member)
    members[static_cast<size_t>(member)] = member;
  // One communicator for all the calls (building one is O(job size)).
  RecordingChannel channel(rank, hierarchy.size());
  collectives::Communicator communicator(
      channel, std::make_shared<const collectives::Membership>(std::move(members), rank, hierarchy),
      1, 1, policy, std::nullopt, std::nullopt);
  std::vector<std::set<int>> peers_of_call;
  for (CallPlan& call : calls) {
    std::set<int> peers;
    for (int root : call.collective == Collective::bcast ? roots : std::vector<int>{0}) {
      const std::set<int> of_root = peers_of(communicator, channel, call.collective, call.bytes,
                                             root, send.get(), recv.get(), &call.algorithm);
      peers.insert(of_root.begin(), of_root.end());
    }
    peers_of_call.push_back(std::move(peers));
  }
  return peers_of_call;
}

std::string memory_text(size_t bytes) {
  char text[32];
  if (bytes < (1 << 20)) {
    std::snprintf(text, sizeof(text), "%.1f KiB", static_cast<double>(bytes) / (1 << 10));
  } else {
    std::snprintf(text, sizeof(text), "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  }
  return text;
}

void fill_costs(const PlanRequest& request, ConnectionPlan& plan) {
  const size_t ranks = size_t(request.nodes) * size_t(request.ranks_per_node);
  plan.rc_qps_all_remote = ranks - size_t(request.ranks_per_node);
  plan.rc_qps_on_demand = size_t(plan.most.remote);
  plan.xrc_send_qps = size_t(plan.most.remote_nodes);
  // Each process of another node reaching this one brings one INI QP, answered by one TGT:
  // by symmetry of the algorithms, as many as this node's processes send INIs out.
  plan.xrc_receive_qps = size_t(request.ranks_per_node) * plan.xrc_send_qps;
  const auto local = static_cast<size_t>(request.ranks_per_node);
  plan.shared_segment_bytes = transport::shm::ShmChannel::segment_bytes(request.ranks_per_node);
  plan.shared_polled_bytes = transport::shm::ShmChannel::polled_bytes(request.ranks_per_node);
  plan.slot_set_bytes = local * sizeof(transport::shm::SlotRegion::Slot);
  plan.ring_bytes = transport::shm::Ring::kBytes;
  plan.shared_in_use_bytes = transport::shm::ShmChannel::control_bytes() +
                             plan.shared_polled_bytes + plan.slot_set_bytes +
                             local * size_t(plan.most.local) * (plan.ring_bytes + 4096);
#ifdef IBCOLL_HAVE_VERBS
  plan.receive_bytes = transport::verbs::VerbsChannel::buffer_bytes(request.config.verbs);
  transport::verbs::CreditLedger ledger(
      transport::verbs::VerbsChannel::lent_credits(request.config.verbs),
      request.config.verbs.credits);
  for (int peer = 0; peer < plan.most.remote; ++peer)
    ledger.open(peer, Clock::now());
  plan.credits_per_peer = ledger.share();
  plan.address_bytes = ranks * sizeof(transport::verbs::EndpointAddress);
#endif
}

}  // namespace

ConnectionPlan plan_connections(const PlanRequest& request) {
  if (request.nodes < 1) {
    throw Error(Code::invalid_argument,
                "nodes: must be at least 1, got " + std::to_string(request.nodes));
  }
  if (request.ranks_per_node < 1) {
    throw Error(Code::invalid_argument, "ranks per node: must be at least 1, got " +
                                            std::to_string(request.ranks_per_node));
  }
  if (int64_t{request.nodes} * request.ranks_per_node > (int64_t{1} << 24)) {
    throw Error(Code::invalid_argument, "nodes × ranks per node: at most 2^24 ranks");
  }
  const int size = request.nodes * request.ranks_per_node;
  std::vector<topo::MemberPlace> places(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank)
    places[static_cast<size_t>(rank)].node = rank / request.ranks_per_node;
  const topo::Hierarchy hierarchy(places);

  ConnectionPlan plan;
  plan.nodes = request.nodes;
  plan.ranks_per_node = request.ranks_per_node;
  plan.ranks_planned = sample(hierarchy, request.exhaustive_up_to);
  plan.roots_planned = plan.ranks_planned;
  plan.calls = calls_of(request.sizes);
  for (int rank : plan.ranks_planned) {
    const std::vector<std::set<int>> peers_of_call =
        peers_in_calls(rank, hierarchy, request.config.policy, plan.calls, plan.roots_planned);
    std::set<int> all_calls;
    for (size_t call = 0; call < plan.calls.size(); ++call) {
      keep_most(plan.calls[call].most, count_peers(peers_of_call[call], rank, hierarchy));
      all_calls.insert(peers_of_call[call].begin(), peers_of_call[call].end());
    }
    plan.peers_of_rank.push_back(count_peers(all_calls, rank, hierarchy));
    keep_most(plan.most, plan.peers_of_rank.back());
  }
  std::vector<int> everyone(static_cast<size_t>(size));
  std::iota(everyone.begin(), everyone.end(), 0);
  plan.membership_bytes =
      collectives::Membership(std::move(everyone), plan.ranks_planned.front(), hierarchy).bytes();
  fill_costs(request, plan);
  return plan;
}

std::set<int> planned_peers(int rank, const topo::Hierarchy& hierarchy,
                            const collectives::Policy& policy, const std::vector<size_t>& sizes) {
  const PlanRequest defaults;
  std::vector<CallPlan> calls = calls_of(sizes);
  std::set<int> peers;
  for (const std::set<int>& of_call :
       peers_in_calls(rank, hierarchy, policy, calls, sample(hierarchy, defaults.exhaustive_up_to)))
    peers.insert(of_call.begin(), of_call.end());
  return peers;
}

std::string describe(const ConnectionPlan& plan) {
  const int size = plan.nodes * plan.ranks_per_node;
  const bool exhaustive = static_cast<int>(plan.ranks_planned.size()) == size;
  std::ostringstream out;
  out << "plan for " << plan.nodes << " nodes x " << plan.ranks_per_node << " ranks per node ("
      << size << " ranks, placed node by node), "
      << (exhaustive ? "every rank and every bcast root"
                     : std::to_string(plan.ranks_planned.size()) +
                           " ranks and bcast roots on the first, a middle and the last node")
      << ":\n";
  out << "  peers each call needs, the most of any rank planned (local: node stages by "
         "messages, as without a slot region):\n";
  for (const CallPlan& c : plan.calls) {
    char line[160];
    std::snprintf(line, sizeof(line), "    %-9s %9s  %-20s remote %5d on %5d nodes, local %4d\n",
                  collectives::collective_name(c.collective), size_text(c.bytes).c_str(),
                  c.algorithm, c.most.remote, c.most.remote_nodes, c.most.local);
    out << line;
  }
  const int bound =
      2 * static_cast<int>(std::ceil(std::log2(std::max(plan.nodes, 1)))) + plan.ranks_per_node;
  out << "  all these calls together, per process: remote peers " << plan.most.remote << " (on "
      << plan.most.remote_nodes << " nodes; 2 log2(nodes) + ranks per node = " << bound
      << "), local peers " << plan.most.local << "\n";
  out << "  send QPs per process:\n"
      << "    RC, one per remote rank (wired up front): " << plan.rc_qps_all_remote << "\n"
      << "    RC on demand, one per remote peer (ibcoll without XRC): " << plan.rc_qps_on_demand
      << "\n"
      << "    XRC, one INI per remote node talked to (ibcoll with XRC): " << plan.xrc_send_qps
      << " (and per node about " << plan.xrc_receive_qps
      << " TGT QPs, one for each INI that reaches it)\n";
  out << "  memory:\n"
      << "    verbs buffers per process (SRQ and send slots, whatever the job's size): "
      << memory_text(plan.receive_bytes) << "\n"
      << "    receive credits per remote peer, with " << plan.most.remote
      << " peers sending to a process (from the peers connected, never the job's size): "
      << plan.credits_per_peer << "\n"
      << "    peer addresses per process (the bootstrap exchange; grows with the job): "
      << memory_text(plan.address_bytes) << "\n"
      << "    a communicator of all ranks, its members' list and map per process (grows with the "
         "job; its duplicates share it): "
      << memory_text(plan.membership_bytes) << "\n"
      << "    shared segment per node (" << plan.ranks_per_node
      << " local ranks): " << memory_text(plan.shared_in_use_bytes)
      << " in use at most for these calls, of " << memory_text(plan.shared_segment_bytes)
      << " of sparse file, whose pages exist where used: " << memory_text(plan.shared_polled_bytes)
      << " that idle polls read (a bitmap per rank), " << memory_text(plan.slot_set_bytes)
      << " per communicator holding a slot set, " << memory_text(plan.ring_bytes)
      << " per pair that talks\n";
  return out.str();
}

}  // namespace ibcoll::runtime
