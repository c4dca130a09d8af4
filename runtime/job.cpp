#include "runtime/job.h"

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

Job::Job()
    : config_(configure()),
      launch_(identify()),
      store_(config_.bootstrap, launch_.rank, launch_.size, launch_.secret, config_.timeout),
      engine_(config_.wait) {}

void Job::wait(const std::function<bool()>& done, const char* what) {
  engine_.wait(done, config_.timeout, what);
}

}  // namespace ibcoll::runtime
