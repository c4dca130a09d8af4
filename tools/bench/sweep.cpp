#include "tools/bench/sweep.h"

#include <algorithm>
#include <chrono>

namespace ibcoll::bench {
namespace {

using Clock = std::chrono::steady_clock;

int iterations_for(size_t bytes, const Settings& settings) {
  if (settings.iterations > 0) return settings.iterations;
  const size_t budget = size_t{160} << 20;  // bytes per rank moved per round
  return static_cast<int>(std::clamp<size_t>(budget / std::max<size_t>(bytes, 1), 10, 1000));
}

// nccl-tests: allreduce moves 2(n-1)/n of the data over each rank's link; bcast moves it once.
double bus_factor(Collective collective, int ranks) {
  if (collective == Collective::bcast || ranks == 1) return 1.0;
  return 2.0 * (ranks - 1) / ranks;
}

// One call of `count` floats whose result is checked on every rank: small integers, so the sum
// is exact in float whatever the order; bcast from rank 0. True when every element of every
// rank is right.
bool check_one_call(Subject& subject, Collective collective, std::vector<float>& send,
                    std::vector<float>& recv, size_t count) {
  const int me = subject.rank(), n = subject.size();
  auto value = [](int rank, size_t i) { return static_cast<float>((rank + 1) * (i % 7 + 1)); };
  for (size_t i = 0; i < count; ++i) {
    send[i] = value(me, i);
    recv[i] = collective == Collective::bcast && me == 0 ? value(0, i) : -1.0f;
  }
  subject.run(collective, send.data(), recv.data(), count);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    const float want = collective == Collective::bcast
                           ? value(0, i)
                           : static_cast<float>((i % 7 + 1) * n * (n + 1) / 2);
    wrong += recv[i] != want;
  }
  return subject.min_avg_max(static_cast<double>(wrong))[2] == 0;
}

}  // namespace

std::vector<Measurement> sweep(Subject& subject, Subject& separator, Collective collective,
                               const Settings& settings,
                               const std::function<void(const Measurement&)>& on_point) {
  const size_t largest = *std::max_element(settings.sizes.begin(), settings.sizes.end());
  std::vector<float> send(largest / 4, 1.0f), recv(largest / 4, 0.0f);
  std::vector<Measurement> out;
  for (size_t bytes : settings.sizes) {
    const size_t count = bytes / 4;
    const int iterations = iterations_for(bytes, settings);
    for (int i = 0; i < std::max(2, iterations / 10); ++i)
      subject.run(collective, send.data(), recv.data(), count);
    std::vector<double> round_means;
    for (int round = 0; round < settings.rounds; ++round) {
      std::chrono::duration<double, std::micro> total{0};
      if (settings.pipelined) {
        subject.barrier();
        const auto start = Clock::now();
        for (int i = 0; i < iterations; ++i)
          subject.run(collective, send.data(), recv.data(), count);
        total = Clock::now() - start;
      } else {
        for (int i = 0; i < iterations; ++i) {
          separator.barrier();
          const auto start = Clock::now();
          subject.run(collective, send.data(), recv.data(), count);
          total += Clock::now() - start;
        }
      }
      round_means.push_back(total.count() / iterations);
    }
    std::nth_element(round_means.begin(), round_means.begin() + round_means.size() / 2,
                     round_means.end());
    const auto [low, avg, high] = subject.min_avg_max(round_means[round_means.size() / 2]);
    Measurement m{collective, subject.name(),
                  bytes,      subject.size(),
                  avg,        low,
                  high,       0,
                  0,          subject.algorithm(collective, count)};
    m.algbw = static_cast<double>(bytes) / (avg * 1e3);  // bytes/µs/1e3 = GB/s
    m.busbw = m.algbw * bus_factor(collective, m.ranks);
    m.correct = check_one_call(subject, collective, send, recv, count);
    out.push_back(m);
    on_point(m);
  }
  return out;
}

}  // namespace ibcoll::bench
