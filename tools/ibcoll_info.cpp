// ibcoll_info: prints the configuration table (every IBCOLL_* variable, its default and its
// current value), the algorithm table with what the selection picks by size, and, when a verbs
// device is present, what the transport would use.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "base/status.h"
#include "collectives/select.h"
#include "runtime/config.h"
#ifdef IBCOLL_HAVE_VERBS
#include "runtime/verbs_endpoint.h"
#include "transport/verbs/device.h"
#include "transport/verbs/xrc_domain.h"
#endif

int main(int argc, char** argv) {
  using namespace ibcoll;
  const char* usage =
      "usage: ibcoll_info\n"
      "Prints every IBCOLL_* variable (default, current value, meaning), the algorithm table\n"
      "with what the automatic choice picks by size, and, when a verbs device is there, the\n"
      "device, port and receive sharing the transport would use. It takes no options.\n";
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
      "\nautomatic choice by bytes per rank (ranks on one node with shared memory / "
      "otherwise), for 2 and 8 ranks\n\n");
  for (auto collective : {collectives::Collective::allreduce, collectives::Collective::bcast}) {
    for (size_t bytes :
         {size_t{8}, size_t{4096}, size_t{65536}, size_t{1} << 20, size_t{16} << 20}) {
      std::printf("%-10s %9zu B:", collectives::collective_name(collective), bytes);
      for (int ranks : {2, 8}) {
        for (bool slots : {true, false}) {
          std::printf(" %s",
                      collectives::select_algorithm(collective, bytes, ranks, slots, "").name);
          std::printf(slots ? " /" : (ranks == 2 ? ";" : "\n"));
        }
      }
    }
  }
  try {
    const runtime::Config config = runtime::Config::from_environment();
    log::set_level(config.log_level);
    std::printf("\nwait policy: %s, timeout: %lld ms\n", transport::wait_policy_name(config.wait),
                static_cast<long long>(config.timeout.count()));
#ifdef IBCOLL_HAVE_VERBS
    transport::verbs::Device device(config.verbs.device, config.verbs.gid_index);
    auto xrc = transport::verbs::open_xrc_domain(
        device, transport::verbs::XrcMode::automatic,
        runtime::xrc_domain_file(config, "ibcoll_info " + std::to_string(getpid())));
    std::printf("verbs: device %s port %d, %s, GID index %d, receive sharing: %s\n",
                device.name().c_str(), device.port(), device.is_ethernet() ? "RoCE" : "InfiniBand",
                device.gid_index(),
                xrc ? "XRC available (ibcoll uses per-peer RC on one SRQ for now)"
                    : "per-peer RC QPs on one shared SRQ (no XRC)");
#endif
  } catch (const Error& e) {
    std::printf("\n%s\n", e.what());
    return e.status().code() == Code::invalid_argument ? 2 : 0;
  }
  return 0;
}
