// The measurement loop of ibcoll_bench (OSU style): per size, a warm-up, then rounds of calls,
// each call timed alone between barriers as OSU's osu_allreduce / osu_bcast do (or, pipelined,
// a loop of back-to-back calls timed whole: a bcast's root may then run ahead of the others);
// each rank keeps the median of its round means, and the table shows the minimum, average and
// maximum of those over ranks. After the timing, one more call per size (not timed) has its
// result checked element by element on every rank.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tools/bench/subject.h"

namespace ibcoll::bench {

struct Settings {
  std::vector<size_t> sizes;  // bytes per rank, multiples of 4 (float32)
  int rounds = 5;
  int iterations = 0;  // per round; 0: by size (1000 small .. 10 at 16 MiB)
  bool pipelined = false;
};

struct Measurement {
  Collective collective;
  std::string library;
  size_t bytes = 0;
  int ranks = 0;
  double avg_us = 0, min_us = 0, max_us = 0;
  double algbw = 0, busbw = 0;  // GB/s, nccl-tests definitions
  std::string algorithm;
  bool correct = false;  // the checked call gave the right result on every rank
};

// Measures every size; `on_point` sees each measurement as it completes (for progress).
// `separator` is the subject whose barrier separates the calls (OSU: MPI's, for any library).
std::vector<Measurement> sweep(Subject& subject, Subject& separator, Collective collective,
                               const Settings& settings,
                               const std::function<void(const Measurement&)>& on_point);

}  // namespace ibcoll::bench
