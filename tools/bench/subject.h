// The libraries ibcoll_bench times, behind one interface: ibcoll (through its C API) and, under
// mpirun with --compare-mpi, the MPI library's own MPI_Allreduce / MPI_Bcast.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "ibcoll/ibcoll.h"

namespace ibcoll::bench {

enum class Collective { allreduce, bcast };
const char* collective_name(Collective collective);

class Subject {
 public:
  virtual ~Subject() = default;
  virtual const char* name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // One call on `count` float32 (allreduce: sum from `send` into `recv`; bcast: `recv` from
  // rank 0). Throws std::runtime_error with the library's message on failure.
  virtual void run(Collective collective, const float* send, float* recv, size_t count) = 0;
  virtual void barrier() = 0;
  // The minimum, average and maximum of every rank's `mine`, on every rank.
  virtual std::array<double, 3> min_avg_max(double mine) = 0;
  // The algorithm the library picks for `count` float32 ("" where it does not say).
  virtual std::string algorithm(Collective collective, size_t count) = 0;
  // How this rank reaches `rank` ("" where the library does not say).
  virtual std::string transport_to(int rank) = 0;
  // The thresholds the machine decided for the library, a line each ("" where it does not say).
  virtual std::string thresholds() { return {}; }
};

// ibcoll from the environment (ibcoll_init) or through `bootstrap` (ibcoll_init_with); throws on
// failure, finalizes on destruction.
std::unique_ptr<Subject> make_ibcoll_subject(const ibcoll_bootstrap_t* bootstrap = nullptr);
// The MPI library; MPI_Init must have been called. Null when built without MPI.
std::unique_ptr<Subject> make_mpi_subject();

}  // namespace ibcoll::bench
