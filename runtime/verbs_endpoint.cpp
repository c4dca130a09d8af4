#include "runtime/verbs_endpoint.h"

#include <cstring>

#include "base/status.h"

namespace ibcoll::runtime {
namespace {

Config configure() {
  Config config = Config::from_environment();
  log::set_level(config.log_level);
  return config;
}

LaunchInfo identify() {
  LaunchInfo launch = launch_info_from_environment();
  log::set_tag("rank " + std::to_string(launch.rank));
  return launch;
}

}  // namespace

VerbsEndpoint::VerbsEndpoint()
    : config_(configure()),
      launch_(identify()),
      store_(config_.bootstrap, launch_.rank, launch_.size, launch_.secret, config_.timeout),
      channel_(std::make_unique<transport::verbs::VerbsChannel>(launch_.rank, launch_.size,
                                                                config_.verbs)),
      engine_(config_.wait) {
  using transport::verbs::EndpointAddress;
  const EndpointAddress mine = channel_->local_address();
  std::string bytes(sizeof(mine), '\0');
  std::memcpy(bytes.data(), &mine, sizeof(mine));
  const auto gathered = store_.allgather("verbs-address", bytes);
  std::vector<EndpointAddress> all(gathered.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (gathered[r].size() != sizeof(EndpointAddress)) {
      throw Error(Code::mismatch, "rank " + std::to_string(r) +
                                      " published a verbs address of another ibcoll version");
    }
    std::memcpy(&all[r], gathered[r].data(), sizeof(EndpointAddress));
  }
  channel_->set_peer_addresses(std::move(all));
  engine_.add(channel_.get());
}

void VerbsEndpoint::wait(const std::function<bool()>& done, const char* what) {
  engine_.wait(done, config_.timeout, what);
}

}  // namespace ibcoll::runtime
