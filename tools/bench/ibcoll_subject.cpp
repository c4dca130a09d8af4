#include <stdexcept>

#include "ibcoll/ibcoll.h"
#include "tools/bench/subject.h"

namespace ibcoll::bench {

const char* collective_name(Collective collective) {
  return collective == Collective::allreduce ? "allreduce" : "bcast";
}

namespace {

void check(ibcoll_status_t status, const char* call) {
  if (status != IBCOLL_SUCCESS) {
    throw std::runtime_error(std::string(call) + ": " + ibcoll_status_name(status) + ": " +
                             ibcoll_last_error());
  }
}

class IbcollSubject final : public Subject {
 public:
  explicit IbcollSubject(const ibcoll_bootstrap_t* bootstrap) {
    if (bootstrap) {
      check(ibcoll_init_with(bootstrap, &context_), "ibcoll_init_with");
    } else {
      check(ibcoll_init(&context_), "ibcoll_init");
    }
    check(ibcoll_comm_world(context_, &world_), "ibcoll_comm_world");
    check(ibcoll_comm_rank(world_, &rank_), "ibcoll_comm_rank");
    check(ibcoll_comm_size(world_, &size_), "ibcoll_comm_size");
  }
  ~IbcollSubject() override { ibcoll_finalize(context_); }

  const char* name() const override { return "ibcoll"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  void run(Collective collective, const float* send, float* recv, size_t count) override {
    if (collective == Collective::allreduce) {
      check(ibcoll_allreduce(send, recv, count, IBCOLL_FLOAT32, IBCOLL_SUM, world_),
            "ibcoll_allreduce");
    } else {
      check(ibcoll_bcast(recv, count, IBCOLL_FLOAT32, 0, world_), "ibcoll_bcast");
    }
  }

  void barrier() override {
    char token = 0;
    check(ibcoll_allreduce(IBCOLL_IN_PLACE, &token, 1, IBCOLL_INT8, IBCOLL_MAX, world_), "barrier");
  }

  std::array<double, 3> min_avg_max(double mine) override {
    double low = mine, high = mine, sum = mine;
    check(ibcoll_allreduce(IBCOLL_IN_PLACE, &low, 1, IBCOLL_FLOAT64, IBCOLL_MIN, world_), "min");
    check(ibcoll_allreduce(IBCOLL_IN_PLACE, &high, 1, IBCOLL_FLOAT64, IBCOLL_MAX, world_), "max");
    check(ibcoll_allreduce(IBCOLL_IN_PLACE, &sum, 1, IBCOLL_FLOAT64, IBCOLL_SUM, world_), "sum");
    return {low, sum / size_, high};
  }

  std::string algorithm(Collective collective, size_t count) override {
    const char* name = ibcoll_algorithm(
        world_, collective == Collective::allreduce ? IBCOLL_ALLREDUCE : IBCOLL_BCAST, count,
        IBCOLL_FLOAT32);
    return name ? name : "?";
  }

  std::string thresholds() override {
    const char* text = ibcoll_thresholds(context_);
    return text ? text : "";
  }

  std::string transport_to(int rank) override {
    const char* name = ibcoll_transport(world_, rank);
    return name ? name : "?";
  }

 private:
  ibcoll_context_t context_ = nullptr;
  ibcoll_comm_t world_ = nullptr;
  int rank_ = 0, size_ = 1;
};

}  // namespace

std::unique_ptr<Subject> make_ibcoll_subject(const ibcoll_bootstrap_t* bootstrap) {
  return std::make_unique<IbcollSubject>(bootstrap);
}

}  // namespace ibcoll::bench
