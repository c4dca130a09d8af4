#include "tools/bench/report.h"

#include <stdexcept>

namespace ibcoll::bench {

std::string format_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int unit = 0;
  while (unit < 3 && bytes >= 1024 && bytes % 1024 == 0) {
    bytes /= 1024;
    ++unit;
  }
  return std::to_string(bytes) + " " + units[unit];
}

void print_table(std::FILE* out, const std::vector<Measurement>& ours,
                 const std::vector<Measurement>& theirs) {
  if (ours.empty()) return;
  const Measurement& first = ours.front();
  std::fprintf(out, "\n# %s, %d ranks, float32%s\n", collective_name(first.collective), first.ranks,
               first.collective == Collective::allreduce ? " sum" : ", root 0");
  std::fprintf(out, "%10s %10s %10s %10s %9s %9s  %-20s", "size", "avg(us)", "min(us)", "max(us)",
               "algbw", "busbw", "algorithm");
  if (!theirs.empty()) std::fprintf(out, " %10s %9s %7s", "mpi(us)", "mpi busbw", "ratio");
  std::fprintf(out, "\n");
  for (size_t i = 0; i < ours.size(); ++i) {
    const Measurement& m = ours[i];
    std::fprintf(out, "%10s %10.2f %10.2f %10.2f %9.3f %9.3f  %-20s", format_bytes(m.bytes).c_str(),
                 m.avg_us, m.min_us, m.max_us, m.algbw, m.busbw,
                 (m.correct ? m.algorithm : m.algorithm + " WRONG RESULT").c_str());
    if (i < theirs.size()) {
      std::fprintf(out, " %10.2f %9.3f %7.2f", theirs[i].avg_us, theirs[i].busbw,
                   m.avg_us / theirs[i].avg_us);
    }
    std::fprintf(out, "\n");
  }
  std::fflush(out);
}

void write_csv(const std::string& path, const std::vector<Measurement>& all) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw std::runtime_error("cannot write " + path);
  std::fprintf(f,
               "collective,library,ranks,bytes,avg_us,min_us,max_us,algbw_GBps,busbw_GBps,"
               "algorithm,result\n");
  for (const Measurement& m : all) {
    std::fprintf(f, "%s,%s,%d,%zu,%.3f,%.3f,%.3f,%.4f,%.4f,%s,%s\n", collective_name(m.collective),
                 m.library.c_str(), m.ranks, m.bytes, m.avg_us, m.min_us, m.max_us, m.algbw,
                 m.busbw, m.algorithm.c_str(), m.correct ? "right" : "WRONG");
  }
  std::fclose(f);
}

}  // namespace ibcoll::bench
