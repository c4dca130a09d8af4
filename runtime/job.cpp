#include "runtime/job.h"

#include "runtime/bootstrap/local_launch.h"
#include "runtime/bootstrap/set_up_exchange.h"
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

}  // namespace

Job::Job()
    : config_(configure()),
      launch_(identify(launch_info_from_environment())),
      bootstrap_(std::make_unique<TcpStore>(config_.bootstrap, launch_.rank, launch_.size,
                                            launch_.secret, config_.timeout)),
      engine_(config_.wait) {}

Job::Job(std::unique_ptr<Bootstrap> bootstrap)
    : Job(agree_on_start(*bootstrap), std::move(bootstrap)) {}

Job::Job(Start start, std::unique_ptr<Bootstrap>&& bootstrap)
    : config_(std::move(start.config)),
      launch_(std::move(start.launch)),
      bootstrap_(std::move(bootstrap)),
      engine_(config_.wait) {}

// One exchange: every rank's verdict on its configuration and the settings all must share,
// and rank 0's fresh job secret (its part's first line).
Job::Start Job::agree_on_start(Bootstrap& bootstrap) {
  Start start;
  const std::vector<std::string> all = exchange_set_up(bootstrap, "start", [&] {
    start.config = configure();
    return (bootstrap.rank() == 0 ? random_secret() : std::string()) + "\n" +
           start.config.shared_settings();
  });
  std::vector<std::string> settings;
  for (const std::string& part : all)
    settings.push_back(part.substr(part.find('\n') + 1));
  check_shared_settings(settings);
  start.launch =
      identify(LaunchInfo{bootstrap.rank(), bootstrap.size(), all[0].substr(0, all[0].find('\n'))});
  return start;
}

void Job::wait(FunctionRef<bool()> done, const char* what) {
  engine_.wait(done, config_.timeout, what);
}

}  // namespace ibcoll::runtime
