// ibcoll_info: prints the configuration table (every IBCOLL_* variable, its default and its
// current value), the algorithm table with what the selection picks by size, the thresholds two
// ranks of this machine run with (measured by two forked ranks, as at any job's start), the
// bootstrap a job started as this process was would use, the topology (IBCOLL_TOPOLOGY or this
// machine's) with the RDMA device each core would use, and,
// when a verbs device is present, what the transport would use.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "collectives/select.h"
#include "runtime/bootstrap/bootstrap_choice.h"
#include "runtime/bootstrap/local_launch.h"
#include "runtime/config.h"
#include "runtime/connection_plan.h"
#include "runtime/context.h"
#include "topo/device_choice.h"
#include "topo/topology.h"
#ifdef IBCOLL_HAVE_VERBS
#include "runtime/verbs_endpoint.h"
#include "transport/verbs/device.h"
#include "transport/verbs/mr_cache.h"
#include "transport/verbs/xrc_domain.h"
#endif

namespace {

// "0-3,8" for {0, 1, 2, 3, 8} (ascending).
std::string ranges(const std::vector<int>& sorted) {
  std::string text;
  for (size_t i = 0; i < sorted.size();) {
    size_t end = i;
    while (end + 1 < sorted.size() && sorted[end + 1] == sorted[end] + 1)
      ++end;
    text += (text.empty() ? "" : ",") + std::to_string(sorted[i]) +
            (end > i ? "-" + std::to_string(sorted[end]) : "");
    i = end + 1;
  }
  return text;
}

// What the machine decides for a job, as two of its ranks on this node would: two ranks forked
// here start ibcoll (measuring what is left to measure) and the first prints the outcome. Forked
// before this process makes any verbs call.
void print_thresholds() {
  using namespace ibcoll;
  std::printf(
      "\nthresholds two ranks of this machine run with (two forked ranks started ibcoll)\n\n");
  std::fflush(stdout);
  const auto exits = runtime::launch_local_ranks(2, [](int rank, int) {
    try {
      runtime::Context context;
      if (rank == 0) std::printf("%s", context.thresholds().c_str());
      std::fflush(stdout);
      return 0;
    } catch (const Error& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 1;
    }
  });
  if (!std::all_of(exits.begin(), exits.end(), [](const auto& e) { return e.ok(); }))
    std::printf("(two ranks could not start: %s)\n", runtime::describe(exits).c_str());
}

#ifdef IBCOLL_HAVE_VERBS
// How the verbs channel would share receive queues here, under the process's settings.
std::string receive_sharing(const ibcoll::runtime::Config& config,
                            const ibcoll::transport::verbs::Device& device) {
  using namespace ibcoll::transport::verbs;
  const std::string rc = "per-peer RC QPs on one shared SRQ";
  if (config.verbs.xrc == XrcMode::off) return rc + " (IBCOLL_XRC=off)";
  if (config.verbs.connect == ConnectMode::rdmacm) return rc + " (IBCOLL_CM=rdmacm makes RC)";
  auto xrc = open_xrc_domain(
      device, XrcMode::automatic,
      ibcoll::runtime::xrc_domain_file(config, "ibcoll_info " + std::to_string(getpid())));
  if (xrc) return "XRC: one INI QP per remote node, one XRC SRQ per process";
  if (config.verbs.xrc == XrcMode::on) return "none: IBCOLL_XRC=on, and the device has no XRC";
  return rc + " (the device has no XRC)";
}
#endif

// The topology, this process's place in it, and which device a rank bound to each core (local
// rank = the core's index) would choose with IBCOLL_DEVICE unset.
void print_topology(const ibcoll::runtime::Config& config) {
  using namespace ibcoll;
  const topo::Topology topology = topo::Topology::load(config.topology);
  std::printf("\ntopology (%s): %s\n",
              config.topology.empty() ? "this machine" : config.topology.c_str(),
              topology.summary().c_str());
  const topo::CpuSet mine = topo::CpuSet::of_this_process();
  const topo::Place place = topology.place_of(mine);
  std::printf("this process's cpus: %s (package %d, NUMA node %d; -1: spans several)\n",
              mine.to_list().c_str(), place.package, place.numa);
  for (const topo::NetworkDevice& device : topology.network_devices())
    std::printf("RDMA device %s: near cpus %s\n", device.name.c_str(),
                device.locality.to_list().c_str());
#ifdef IBCOLL_HAVE_VERBS
  const std::vector<std::string> active = transport::verbs::active_device_names();
  if (active.empty()) {
    std::printf("no RDMA device has an active port\n");
    return;
  }
  const std::vector<topo::CpuSet> cores = topology.cores_of(topology.all_cpus());
  std::vector<std::pair<std::string, std::vector<int>>> cores_by_device;
  for (size_t i = 0; i < cores.size(); ++i) {
    const std::string name =
        topo::choose_device(topology, active, cores[i], static_cast<int>(i)).name;
    auto entry = std::find_if(cores_by_device.begin(), cores_by_device.end(),
                              [&](const auto& e) { return e.first == name; });
    if (entry == cores_by_device.end()) entry = cores_by_device.insert(entry, {name, {}});
    entry->second.push_back(static_cast<int>(i));
  }
  for (const auto& [name, indices] : cores_by_device)
    std::printf("ranks bound to cores %s use %s\n", ranges(indices).c_str(), name.c_str());
#endif
}

// What would carry messages between nodes from this machine (IBCOLL_TRANSPORT), and why.
void print_transport(const ibcoll::runtime::Config& config) {
  using ibcoll::runtime::TransportMode;
#ifdef IBCOLL_HAVE_VERBS
  const bool verbs_here = !ibcoll::transport::verbs::active_device_names().empty();
#else
  const bool verbs_here = false;
#endif
#ifdef IBCOLL_HAVE_UCX
  const char* ucx = "UCX";
#else
  const char* ucx = "nothing (this build has no UCX transport)";
#endif
  const char* how = "";
  switch (config.transport) {
    case TransportMode::automatic:
      how = verbs_here ? "verbs (an active verbs device is here; UCX if some node of the job has "
                         "none)"
                       : ucx;
      break;
    case TransportMode::shm:
      how = "nothing (shm: every rank on one node)";
      break;
    case TransportMode::verbs:
      how = "verbs, also inside a node (forced)";
      break;
    case TransportMode::ucx:
      how = "UCX, also inside a node (forced)";
      break;
  }
  std::printf("between nodes, from here: %s%s\n", how,
              config.transport == TransportMode::automatic && !verbs_here
                  ? " (no active verbs device here)"
                  : "");
}

// Which bootstrap a rank started as this process was would take, and why (or why none can).
void print_bootstrap() {
  using namespace ibcoll;
  const char* setting = std::getenv("IBCOLL_BOOTSTRAP");
  try {
    const auto choice = runtime::choose_bootstrap(
        setting ? setting : "", [](const char* name) { return std::getenv(name); });
    std::printf("bootstrap of a rank started as this process was: %s (%s)\n",
                runtime::bootstrap_kind_name(choice.kind), choice.reason.c_str());
  } catch (const Error& e) {
    std::printf("bootstrap of a rank started as this process was: none (%s)\n", e.what());
  }
}

// --plan NODES PPN: the connection plan of a virtual job (runtime/connection_plan.h).
int print_plan(const char* nodes_text, const char* ranks_per_node_text) {
  using namespace ibcoll;
  auto count = [](const char* name, const char* text) {
    char* end = nullptr;
    const long value = std::strtol(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > (1 << 24)) {
      throw Error(Code::invalid_argument,
                  std::string(name) + ": '" + text + "' is not a count from 1 to 2^24");
    }
    return static_cast<int>(value);
  };
  try {
    runtime::PlanRequest request;
    request.nodes = count("NODES", nodes_text);
    request.ranks_per_node = count("PPN", ranks_per_node_text);
    request.config = runtime::Config::from_environment();
    std::printf("%s", runtime::describe(runtime::plan_connections(request)).c_str());
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "ibcoll_info --plan: %s\n", e.what());
    return 2;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ibcoll;
  const char* usage =
      "usage: ibcoll_info [--plan NODES PPN]\n"
      "Prints every IBCOLL_* variable (default, current value, meaning), the algorithm table\n"
      "with what the automatic choice picks by size, the topology with the RDMA device a rank\n"
      "bound to each core would use, and, when a verbs device is there, the device, port and\n"
      "receive sharing the transport would use.\n"
      "--plan NODES PPN: for a job of NODES nodes with PPN ranks each, the peers every default\n"
      "algorithm connects a process to, its QPs with RC per peer, RC on demand and XRC, its\n"
      "receive memory and the shared segment per node (no device needed).\n";
  if (argc == 4 && std::string(argv[1]) == "--plan") return print_plan(argv[2], argv[3]);
  if (argc > 1) {
    const std::string arg = argv[1];
    const bool help = arg == "--help" || arg == "-h";
    std::fprintf(help ? stdout : stderr, "%s%s",
                 help ? "" : ("ibcoll_info: unknown argument " + arg + "\n").c_str(), usage);
    return help ? 0 : 2;
  }
  std::printf("ibcoll configuration (environment variables)\n\n");
  std::printf("%-24s %-10s %-16s %s\n", "variable", "default", "current", "meaning");
  for (const runtime::Variable& v : runtime::config_variables()) {
    const char* current = std::getenv(v.name);
    std::printf("%-24s %-10s %-16s %s\n", v.name, *v.default_value ? v.default_value : "-",
                current ? current : "-", v.description);
  }
  std::printf("\nalgorithms (IBCOLL_ALLREDUCE_ALGO, IBCOLL_BCAST_ALGO)\n\n");
  for (const collectives::Algorithm& a : collectives::algorithms()) {
    std::printf("%-10s %-20s %s\n", collectives::collective_name(a.collective), a.name,
                a.description);
  }
  std::printf(
      "\nautomatic choice by bytes per rank: 2 ranks on one node with shared memory / "
      "otherwise; 8 ranks the same; 8 ranks on one node whose single copy takes 16 KiB and up / "
      "8 ranks on 2 nodes, calls checked (IBCOLL_CHECK_CALLS=1); node-local allreduce thresholds "
      "unmeasured (this machine's are below)\n\n");
  using transport::shm::SingleCopySizes;
  const collectives::GroupShape shapes[] = {
      {2, true, 1, false, {}, {}},         {2, false, 1, false, {}, {}},
      {8, true, 1, false, {}, {}},         {8, false, 1, false, {}, {}},
      {8, true, 1, false, {16 << 10}, {}}, {8, false, 2, true, {}, {}}};
  for (auto collective : {collectives::Collective::allreduce, collectives::Collective::bcast}) {
    for (size_t bytes :
         {size_t{8}, size_t{4096}, size_t{65536}, size_t{1} << 20, size_t{16} << 20}) {
      std::printf("%-10s %9zu B:", collectives::collective_name(collective), bytes);
      for (size_t i = 0; i < std::size(shapes); ++i) {
        std::printf("%s %s", i == 0 ? "" : (i % 2 ? " /" : ";"),
                    collectives::select_algorithm(collective, bytes, shapes[i], "").name);
      }
      std::printf("\n");
    }
  }
  print_thresholds();
  try {
    const runtime::Config config = runtime::Config::from_environment();
    log::set_level(config.log_level);
    std::printf("\nwait policy: %s, timeout: %lld ms\n", transport::wait_policy_name(config.wait),
                static_cast<long long>(config.timeout.count()));
    print_bootstrap();
    print_transport(config);
    print_topology(config);
#ifdef IBCOLL_HAVE_VERBS
    transport::verbs::Device device(config.verbs.device, config.verbs.gid_index);
    std::printf("verbs: device %s port %d, %s, GID index %d, receive sharing: %s\n",
                device.name().c_str(), device.port(), device.is_ethernet() ? "RoCE" : "InfiniBand",
                device.gid_index(), receive_sharing(config, device).c_str());
    std::printf("registration cache: %s\n",
                transport::verbs::RegistrationCache::describe(config.verbs.mr_cache).c_str());
#endif
  } catch (const Error& e) {
    std::printf("\n%s\n", e.what());
    return e.status().code() == Code::invalid_argument ? 2 : 0;
  }
  return 0;
}
