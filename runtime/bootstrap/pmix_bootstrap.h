// PmixBootstrap: the job as a PMIx launcher (mpirun, srun --mpi=pmix) knows it. Rank and size
// come from the launcher's PMIx server; an allgather puts this rank's part under the call's
// name, fences once with data collection (the launcher's servers move the parts, across nodes
// in their own tree), then reads every part from this node's store. No address and no secret
// to set by hand: the server only talks to the processes it started.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "runtime/bootstrap/bootstrap.h"

namespace ibcoll::runtime {

class PmixBootstrap final : public Bootstrap {
 public:
  // PMIx_Init. Throws Error(not_supported) when no PMIx server answers. A fence waits at most
  // `timeout` (0: no deadline) where the launcher honours PMIX_TIMEOUT.
  explicit PmixBootstrap(std::chrono::milliseconds timeout);
  ~PmixBootstrap() override;  // PMIx_Finalize: a launcher takes a rank that skips it for failed
  PmixBootstrap(const PmixBootstrap&) = delete;
  PmixBootstrap& operator=(const PmixBootstrap&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override;
  std::vector<std::string> allgather(const std::string& name, const std::string& mine) override;

 private:
  std::string nspace_;
  std::string key_prefix_;  // "ibcoll.N.": this process's Nth context over PMIx
  int rank_ = 0, size_ = 0;
  std::chrono::milliseconds timeout_;
};

}  // namespace ibcoll::runtime
