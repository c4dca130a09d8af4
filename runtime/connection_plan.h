// ConnectionPlan: whom a process of a job connects to, and what that costs it, worked out for a
// virtual job of `nodes` × `ranks_per_node` without devices (`ibcoll_info --plan`). It runs the
// real algorithms, chosen by the real selection table and started as a real call starts them
// (call check included), for one rank at a time over a channel that records the peers they
// talk to and completes every message at once. The transport connects on demand, so these are
// the connections a real run of the same calls makes; with IBCOLL_CONNECT=planned (the default)
// the runtime connects to them at start-up (planned_peers).
// Ranks are placed node by node (block placement); bcasts are planned from several roots. The
// node's stages go by messages, as on a node without a slot region: local peers are those of
// such a run (with slots, the node stages need no ring); remote peers are the same either way.
#pragma once

#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "collectives/communicator.h"
#include "runtime/config.h"
#include "topo/hierarchy.h"

namespace ibcoll::runtime {

struct PlanRequest {
  int nodes = 1;
  int ranks_per_node = 1;
  Config config;  // a real job's: its selection, call checks and verbs settings
  // Bytes per rank of the calls planned, for allreduce (float32 sums) and bcast.
  // The largest reaches the algorithm a rail of a 64-ranks-per-node job runs on 2 MiB.
  std::vector<size_t> sizes = {8, 256, 8 << 10, 64 << 10, 512 << 10, 4 << 20, 32 << 20, 128 << 20};
  // Plan every rank (and every bcast root for each) when the job has at most this many ranks;
  // else a sample of ranks on the first, a middle and the last node, and roots on those nodes.
  int exhaustive_up_to = 64;
};

struct PeerCount {
  int local = 0;         // on the rank's node (shared memory)
  int remote = 0;        // on other nodes (verbs)
  int remote_nodes = 0;  // the other nodes those are on
};

struct CallPlan {
  collectives::Collective collective;
  size_t bytes;
  const char* algorithm;
  PeerCount most;  // the most any planned rank talks to in these calls (over the roots)
};

struct ConnectionPlan {
  int nodes = 1, ranks_per_node = 1;
  std::vector<int> ranks_planned;
  std::vector<PeerCount> peers_of_rank;  // all calls together, by ranks_planned's order
  std::vector<int> roots_planned;
  std::vector<CallPlan> calls;
  PeerCount most;  // all calls together, the most of any planned rank
  // Per process.
  size_t rc_qps_all_remote = 0;  // RC, a QP for every remote rank (wired up front)
  size_t rc_qps_on_demand = 0;   // RC, a QP per remote peer talked to (what ibcoll does)
  size_t xrc_send_qps = 0;       // XRC, one INI QP per remote node talked to
  size_t xrc_receive_qps = 0;    // XRC TGT QPs, per node: one for each INI that reaches it
  size_t receive_bytes = 0;      // SRQ buffers, send buffers, handshake datagrams
  // Receive credits each peer gets (CreditLedger's share) when as many peers as the most
  // remote peers of any rank send to a process: from the peers connected, not the job's size.
  uint32_t credits_per_peer = 0;
  size_t address_bytes = 0;  // every rank's endpoint address (the bootstrap exchange)
  // A communicator of all ranks: its members' list and map (collectives::Membership), which
  // its duplicates share instead of making their own.
  size_t membership_bytes = 0;
  // The node's shared segment: its sparse file, of which pages exist only where used: the
  // bitmaps that idle polls read, a slot set per communicator that holds one, a ring per pair
  // that talks.
  size_t shared_segment_bytes = 0;
  size_t shared_polled_bytes = 0;
  size_t slot_set_bytes = 0;
  size_t ring_bytes = 0;
  // Of it, at most what these calls keep in memory: the control page and bitmaps, one slot set
  // (the world's), and for every rank a ring and a page of answers per local peer it talks to
  // (as many as the most of any rank planned).
  size_t shared_in_use_bytes = 0;
};

// Throws Error(invalid_argument) naming a bad request.
ConnectionPlan plan_connections(const PlanRequest& request);

// The call sizes whose peers the runtime connects at start-up (IBCOLL_CONNECT=planned): where a
// handshake would be a large part of a first call's time. A larger call's handshake is small
// beside its transfer, and planning one runs its reductions over buffers of its size (128 MiB
// took seconds per process in the VM, and as much memory).
inline const std::vector<size_t> kStartUpPlanSizes = {8, 256, 8 << 10, 64 << 10, 512 << 10};

// The peers `rank` of a real job, laid out as `hierarchy`, talks to in calls of `sizes`
// (allreduce, and bcast from the plan's sample of roots) under `policy`: whom the runtime
// connects to at start-up with IBCOLL_CONNECT=planned.
std::set<int> planned_peers(int rank, const topo::Hierarchy& hierarchy,
                            const collectives::Policy& policy,
                            const std::vector<size_t>& sizes = kStartUpPlanSizes);
std::string describe(const ConnectionPlan& plan);

}  // namespace ibcoll::runtime
