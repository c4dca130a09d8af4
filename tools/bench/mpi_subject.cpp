// The MPI library's own collectives, for --compare-mpi (built only where CMake found MPI).
#include <mpi.h>

#include <stdexcept>
#include <string>

#include "tools/bench/subject.h"

namespace ibcoll::bench {
namespace {

void check(int code, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  throw std::runtime_error(std::string(call) + ": " + std::string(text, length));
}

class MpiSubject final : public Subject {
 public:
  MpiSubject() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  }
  const char* name() const override { return "mpi"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void run(Collective collective, const float* send, float* recv, size_t count) override {
    const int n = static_cast<int>(count);
    if (collective == Collective::allreduce) {
      check(MPI_Allreduce(send, recv, n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD), "MPI_Allreduce");
    } else {
      check(MPI_Bcast(recv, n, MPI_FLOAT, 0, MPI_COMM_WORLD), "MPI_Bcast");
    }
  }
  void barrier() override { check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier"); }
  std::array<double, 3> min_avg_max(double mine) override {
    double low = 0, high = 0, sum = 0;
    MPI_Allreduce(&mine, &low, 1, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &high, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return {low, sum / size_, high};
  }
  std::string algorithm(Collective, size_t) override { return ""; }
  std::string transport_to(int) override { return ""; }

 private:
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Subject> make_mpi_subject() {
  return std::make_unique<MpiSubject>();
}

}  // namespace ibcoll::bench
