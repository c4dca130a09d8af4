// VerbsEndpoint: one rank's verbs transport, ready to use. Reads the configuration and the
// launcher environment, joins the TCP store, opens the verbs channel, swaps endpoint addresses
// with every rank (connections are then made on demand) and drives it with a progress engine.
#pragma once

#include <functional>
#include <memory>

#include "runtime/bootstrap/launch_env.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/config.h"
#include "transport/progress.h"
#include "transport/verbs/verbs_channel.h"

namespace ibcoll::runtime {

class VerbsEndpoint {
 public:
  VerbsEndpoint();  // from the environment; throws Error naming what is wrong

  int rank() const { return launch_.rank; }
  int size() const { return launch_.size; }
  const Config& config() const { return config_; }
  TcpStore& store() { return store_; }
  transport::verbs::VerbsChannel& channel() { return *channel_; }
  transport::ProgressEngine& engine() { return engine_; }
  // Drives progress until done(); throws Error(timeout) after IBCOLL_TIMEOUT.
  void wait(const std::function<bool()>& done, const char* what);

 private:
  Config config_;
  LaunchInfo launch_;
  TcpStore store_;
  std::unique_ptr<transport::verbs::VerbsChannel> channel_;
  transport::ProgressEngine engine_;
};

}  // namespace ibcoll::runtime
