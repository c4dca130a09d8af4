// Job: what every rank of a job has before any transport: its configuration, who it is
// (launcher environment), the bootstrap store joined with the job secret, and a progress
// engine. The endpoints (verbs, shared memory) build their channel on top of it.
#pragma once

#include <functional>

#include "runtime/bootstrap/launch_env.h"
#include "runtime/bootstrap/tcp_store.h"
#include "runtime/config.h"
#include "transport/progress.h"

namespace ibcoll::runtime {

class Job {
 public:
  Job();  // from the environment; throws Error naming what is wrong

  int rank() const { return launch_.rank; }
  int size() const { return launch_.size; }
  const Config& config() const { return config_; }
  const LaunchInfo& launch() const { return launch_; }
  TcpStore& store() { return store_; }
  transport::ProgressEngine& engine() { return engine_; }
  // Drives progress until done(); throws Error(timeout) after IBCOLL_TIMEOUT.
  void wait(const std::function<bool()>& done, const char* what);

 private:
  Config config_;
  LaunchInfo launch_;
  TcpStore store_;
  transport::ProgressEngine engine_;
};

}  // namespace ibcoll::runtime
