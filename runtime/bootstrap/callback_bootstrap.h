// CallbackBootstrap: a Bootstrap over a caller's fixed-size allgather (ibcoll_init_with, used
// by the Open MPI component with the communicator's own allgather). Strings of any length go
// as two rounds: every length, then every string padded to the longest.
#pragma once

#include <cstddef>
#include <functional>

#include "runtime/bootstrap/bootstrap.h"

namespace ibcoll::runtime {

// Gathers `bytes` from every rank into `all` (size × bytes, rank order); false on failure.
using FixedAllgather = std::function<bool(const void* mine, void* all, size_t bytes)>;

class CallbackBootstrap final : public Bootstrap {
 public:
  // Throws Error(invalid_argument) naming rank, size or allgather when they are unusable.
  CallbackBootstrap(int rank, int size, FixedAllgather allgather);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return "the caller's allgather (ibcoll_init_with)"; }
  std::vector<std::string> allgather(const std::string& name, const std::string& mine) override;

 private:
  int rank_, size_;
  FixedAllgather allgather_;
};

}  // namespace ibcoll::runtime
