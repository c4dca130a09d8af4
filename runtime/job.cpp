#include "runtime/job.h"

#include "runtime/bootstrap/local_launch.h"
#include "runtime/bootstrap/tcp_store.h"

namespace ibcoll::runtime {
namespace {

Config configure() {
  Config config = Config::from_environment();
  log::set_level(config.log_level);
  return config;
}

LaunchInfo identify(LaunchInfo launch) {
  log::set_tag("rank " + std::to_string(launch.rank));
  return launch;
}

LaunchInfo identify(Bootstrap& bootstrap) {
  LaunchInfo launch{bootstrap.rank(), bootstrap.size(), {}};
  launch.secret = bootstrap.allgather("secret", bootstrap.rank() == 0 ? random_secret() : "")[0];
  return identify(launch);
}

}  // namespace

Job::Job()
    : config_(configure()),
      launch_(identify(launch_info_from_environment())),
      bootstrap_(std::make_unique<TcpStore>(config_.bootstrap, launch_.rank, launch_.size,
                                            launch_.secret, config_.timeout)),
      engine_(config_.wait) {}

Job::Job(std::unique_ptr<Bootstrap> bootstrap)
    : config_(configure()),
      launch_(identify(*bootstrap)),
      bootstrap_(std::move(bootstrap)),
      engine_(config_.wait) {}

void Job::wait(const std::function<bool()>& done, const char* what) {
  engine_.wait(done, config_.timeout, what);
}

}  // namespace ibcoll::runtime
