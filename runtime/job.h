// Job: what every rank of a job has before any transport: its configuration, who it is, the
// bootstrap (the one IBCOLL_BOOTSTRAP chooses: the PMIx launcher's, the TCP store, none for a
// job of one rank; or one the caller brings), and a progress engine. The endpoints (verbs, shared
// memory) build their channel on top of it.
#pragma once

#include <functional>
#include <memory>

#include "runtime/bootstrap/bootstrap.h"
#include "runtime/bootstrap/launch_env.h"
#include "runtime/config.h"
#include "transport/progress.h"

namespace ibcoll::runtime {

class Job {
 public:
  Job();  // with the environment's bootstrap; throws Error naming what is wrong
  // Rank and size from `bootstrap`; the job's secret (which names the shared segment) is drawn
  // by rank 0 and gathered. Collective: a rank whose configuration is bad still joins that
  // first exchange, and then every rank throws its message (a caller's allgather may have no
  // deadline, so no rank may leave before it).
  explicit Job(std::unique_ptr<Bootstrap> bootstrap);

  int rank() const { return launch_.rank; }
  int size() const { return launch_.size; }
  const Config& config() const { return config_; }
  const LaunchInfo& launch() const { return launch_; }
  Bootstrap& bootstrap() { return *bootstrap_; }
  transport::ProgressEngine& engine() { return engine_; }
  // Drives progress until done(); throws Error(timeout) after IBCOLL_TIMEOUT.
  void wait(FunctionRef<bool()> done, const char* what);

 private:
  struct Start {
    Config config;
    LaunchInfo launch;
  };
  static Start agree_on_start(Bootstrap& bootstrap);
  // By reference: the bootstrap must still be there while agree_on_start() runs on it.
  Job(Start start, std::unique_ptr<Bootstrap>&& bootstrap);

  Config config_;
  LaunchInfo launch_;
  std::unique_ptr<Bootstrap> bootstrap_;
  transport::ProgressEngine engine_;
};

}  // namespace ibcoll::runtime
