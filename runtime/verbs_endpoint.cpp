#include "runtime/verbs_endpoint.h"

#include <cstdio>
#include <cstring>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "runtime/bootstrap/set_up_exchange.h"
#include "topo/device_choice.h"
#include "transport/verbs/device.h"

namespace ibcoll::runtime {

std::string xrc_domain_file(const Config& config, const std::string& job) {
  char name[32];
  std::snprintf(name, sizeof(name), "/xrcd-%016zx", std::hash<std::string>()(job));
  return config.xrc_dir + name;
}

std::vector<int> ranks_to_fall_back_for(std::span<const transport::verbs::EndpointAddress> all) {
  std::vector<int> without;
  bool some_with = false;
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].xrc) {
      some_with = true;
    } else {
      without.push_back(static_cast<int>(r));
    }
  }
  if (!some_with) without.clear();
  return without;
}

namespace {

// "ranks 3, 7 and 12 more": a few of `ranks`, for a log line whose length must not grow with
// the job.
std::string some_of(const std::vector<int>& ranks) {
  constexpr size_t kNamed = 4;
  std::string text = ranks.size() == 1 ? "rank" : "ranks";
  for (size_t i = 0; i < ranks.size() && i < kNamed; ++i)
    text += (i ? ", " : " ") + std::to_string(ranks[i]);
  if (ranks.size() > kNamed) text += " and " + std::to_string(ranks.size() - kNamed) + " more";
  return text;
}

}  // namespace

std::unique_ptr<transport::verbs::VerbsChannel> open_verbs_channel(Job& job,
                                                                   const Placement& placement) {
  using transport::verbs::EndpointAddress;
  std::unique_ptr<transport::verbs::VerbsChannel> channel;
  transport::verbs::Options options = job.config().verbs;
  options.xrc_domain_file = xrc_domain_file(job.config(), job.launch().secret);
  options.why_gone = [&bootstrap = job.bootstrap()](int peer) { return bootstrap.why_gone(peer); };
  if (options.device.empty()) {
    const topo::CpuSet cpus = placement.cpus_in_topology();
    const topo::DeviceChoice choice =
        topo::choose_device(*placement.topology, transport::verbs::active_device_names(), cpus,
                            placement.local_rank(job.rank()));
    options.device = choice.name;  // none active: the device says so when it opens
    IBCOLL_LOG(info, "verbs device " << choice.name << ": the nearest to cpus " << cpus.to_list()
                                     << " (" << choice.equally_near << " as near)");
  }
  // Opens the channel and gathers every rank's address.
  auto publish = [&](const char* step) {
    const auto gathered = exchange_set_up(job.bootstrap(), step, [&] {
      channel = std::make_unique<transport::verbs::VerbsChannel>(job.rank(), job.size(), options);
      const EndpointAddress mine = channel->local_address();
      std::string bytes(sizeof(mine), '\0');
      std::memcpy(bytes.data(), &mine, sizeof(mine));
      return bytes;
    });
    std::vector<EndpointAddress> all(gathered.size());
    for (size_t r = 0; r < all.size(); ++r) {
      if (gathered[r].size() != sizeof(EndpointAddress)) {
        throw Error(Code::mismatch, "rank " + std::to_string(r) +
                                        " published a verbs address of another ibcoll version");
      }
      std::memcpy(&all[r], gathered[r].data(), sizeof(EndpointAddress));
    }
    return all;
  };
  std::vector<EndpointAddress> all = publish("verbs-address");
  if (options.xrc == transport::verbs::XrcMode::automatic) {
    // Every rank sees the same addresses, so all take this turn together.
    const std::vector<int> without = ranks_to_fall_back_for(all);
    if (!without.empty()) {
      if (job.rank() == 0) {
        IBCOLL_LOG(warn, "XRC is unavailable to " << some_of(without) << " of " << job.size()
                                                  << ": the job uses per-peer RC QPs on one "
                                                     "shared SRQ instead (IBCOLL_XRC=auto)");
      }
      channel.reset();
      options.xrc = transport::verbs::XrcMode::off;
      all = publish("verbs-address-rc");
    }
  }
  channel->set_peer_addresses(std::move(all));
  return channel;
}

VerbsEndpoint::VerbsEndpoint()
    : channel_(open_verbs_channel(*this, exchange_placement(bootstrap(), config()))) {
  engine().add(channel_.get());
}

}  // namespace ibcoll::runtime
