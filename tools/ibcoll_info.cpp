// ibcoll_info: prints the configuration table (every IBCOLL_* variable, its default and its
// current value) and, when a verbs device is present, what the transport would use.
#include <cstdio>
#include <cstdlib>

#include "base/status.h"
#include "runtime/config.h"
#ifdef IBCOLL_HAVE_VERBS
#include "transport/verbs/device.h"
#include "transport/verbs/xrc_domain.h"
#endif

int main() {
  using namespace ibcoll;
  std::printf("ibcoll configuration (environment variables)\n\n");
  std::printf("%-24s %-10s %-16s %s\n", "variable", "default", "current", "meaning");
  for (const runtime::Variable& v : runtime::config_variables()) {
    const char* current = std::getenv(v.name);
    std::printf("%-24s %-10s %-16s %s\n", v.name, *v.default_value ? v.default_value : "-",
                current ? current : "-", v.description);
  }
  try {
    const runtime::Config config = runtime::Config::from_environment();
    log::set_level(config.log_level);
    std::printf("\nwait policy: %s, timeout: %lld ms\n", transport::wait_policy_name(config.wait),
                static_cast<long long>(config.timeout.count()));
#ifdef IBCOLL_HAVE_VERBS
    transport::verbs::Device device(config.verbs.device, config.verbs.gid_index);
    auto xrc = transport::verbs::open_xrc_domain(device, transport::verbs::XrcMode::automatic,
                                                 config.verbs.xrc_domain_file);
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
