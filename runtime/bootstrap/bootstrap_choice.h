// Which bootstrap a process started from its environment uses, by IBCOLL_BOOTSTRAP:
//   auto (the default)  PMIx where a PMIx launcher started the process (mpirun, srun
//                       --mpi=pmix); else, for a job of one rank or with no launcher at all, a
//                       singleton; a job of several ranks without PMIx needs a TCP store
//   pmix                PMIx, or an error
//   tcp://host:port     the TCP store rank 0 serves there (host:port alone means the same);
//                       rank and size from the launcher's variables, IBCOLL_JOB_SECRET
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "runtime/bootstrap/bootstrap.h"
#include "runtime/bootstrap/launch_env.h"

namespace ibcoll::runtime {

struct BootstrapChoice {
  enum class Kind { pmix, tcp, singleton };
  Kind kind = Kind::singleton;
  std::string address;  // tcp: host:port
  std::string reason;   // why this one, for the log and ibcoll_info
  LaunchInfo launch;    // tcp: rank, size and secret from the launcher's variables
};

// "pmix", "tcp" or "singleton".
const char* bootstrap_kind_name(BootstrapChoice::Kind kind);

// Throws Error(invalid_argument) naming IBCOLL_BOOTSTRAP (or the launcher's variable) when the
// setting is malformed or no bootstrap can serve the job it describes.
BootstrapChoice choose_bootstrap(const std::string& setting,
                                 const std::function<const char*(const char*)>& lookup);

// The chosen bootstrap, joined: PMIx initialized, the TCP store reached. Fences and connects
// give up after `timeout` (0: never).
std::unique_ptr<Bootstrap> open_bootstrap(const BootstrapChoice& choice,
                                          std::chrono::milliseconds timeout);

}  // namespace ibcoll::runtime
