// Bootstrap: how the ranks of a job swap set-up data (addresses, node names) before any
// transport exists, and meet at the end. A PMIx launcher's server is one (PmixBootstrap), the
// TCP store another; a library that already has a communicator (an MPI library) brings its own
// allgather instead (CallbackBootstrap).
#pragma once

#include <string>
#include <vector>

namespace ibcoll::runtime {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Which bootstrap this is, for the log and ibcoll_info: "TCP store at host:port".
  virtual std::string describe() const = 0;
  // Every rank's `mine`, indexed by rank. Collective; `name` must be unique per call within
  // the job, and ranks make their calls in the same order.
  virtual std::vector<std::string> allgather(const std::string& name, const std::string& mine) = 0;
  void barrier(const std::string& name) { allgather(name, ""); }
  // Some rank of the job is gone (its node may be down, its connections silent for good):
  // this rank leaves without waiting on anyone at the end, not even to hang up.
  virtual void leave_without_everyone() {}
  // Why rank `rank` is known to have left the job (its process ended without finalizing), or
  // empty if it is not known to have (a bootstrap that cannot tell always says so).
  virtual std::string why_gone(int rank) {
    (void)rank;
    return {};
  }
};

}  // namespace ibcoll::runtime
