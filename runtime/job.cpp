#include "runtime/job.h"

#include <cstdlib>

#include "base/log.h"
#include "runtime/bootstrap/bootstrap_choice.h"
#include "runtime/bootstrap/local_launch.h"
#include "runtime/bootstrap/set_up_exchange.h"
#include "runtime/set_up_records.h"

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

// The bootstrap IBCOLL_BOOTSTRAP chooses, joined before the rest of the configuration is
// read, so that a rank whose other settings are bad still reaches the first exchange and every
// rank learns of it there. Its deadline and the log's level until then are IBCOLL_TIMEOUT's and
// IBCOLL_LOG's, or the defaults where those are bad.
std::unique_ptr<Bootstrap> bootstrap_from_environment() {
  auto lookup = [](const char* name) { return std::getenv(name); };
  std::chrono::milliseconds timeout = Config{}.timeout;
  try {
    if (const char* text = lookup("IBCOLL_TIMEOUT")) timeout = parse_timeout(text);
  } catch (const Error&) {
  }
  try {
    if (const char* level = lookup("IBCOLL_LOG")) log::set_level(log::parse_level(level));
  } catch (const Error&) {
  }
  const char* setting = lookup("IBCOLL_BOOTSTRAP");
  return open_bootstrap(choose_bootstrap(setting ? setting : "", lookup), timeout);
}

}  // namespace

Job::Job() : Job(bootstrap_from_environment()) {}

Job::Job(std::unique_ptr<Bootstrap> bootstrap)
    : Job(agree_on_start(*bootstrap), std::move(bootstrap)) {}

Job::Job(Start start, std::unique_ptr<Bootstrap>&& bootstrap)
    : config_(std::move(start.config)),
      launch_(std::move(start.launch)),
      bootstrap_(std::move(bootstrap)),
      engine_(config_.wait) {
  IBCOLL_LOG(info, "bootstrap: " << bootstrap_->describe() << ", rank " << launch_.rank << " of "
                                 << launch_.size);
}

// One exchange: every rank's verdict on its configuration and the settings all must share,
// and rank 0's fresh job secret (its part's first line).
Job::Start Job::agree_on_start(Bootstrap& bootstrap) {
  Start start;
  const std::vector<std::string> all = exchange_set_up(bootstrap, "start", [&] {
    start.config = configure();
    return start_record(
        {bootstrap.rank() == 0 ? random_secret() : std::string(), start.config.shared_settings()});
  });
  std::vector<std::string> settings;
  for (const std::string& part : all)
    settings.push_back(read_start_record(part).settings);
  check_shared_settings(settings);
  start.launch =
      identify(LaunchInfo{bootstrap.rank(), bootstrap.size(), read_start_record(all[0]).secret});
  return start;
}

void Job::wait(FunctionRef<bool()> done, const char* what) {
  engine_.wait(done, config_.timeout, what);
}

}  // namespace ibcoll::runtime
