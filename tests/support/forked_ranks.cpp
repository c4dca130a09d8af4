#include "tests/support/forked_ranks.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace ibcoll::testing {

namespace {
std::string meeting_file(pid_t test, const std::string& name, int rank) {
  return "/tmp/ibcoll-meet-" + std::to_string(test) + "-" + name + "-" + std::to_string(rank);
}
}  // namespace

void meeting_over(const std::string& name, const std::vector<int>& ranks) {
  for (int rank : ranks)
    std::remove(meeting_file(getpid(), name, rank).c_str());
}

void meet_without_ibcoll(const std::string& name, int me, const std::vector<int>& ranks) {
  auto file = [&](int rank) { return meeting_file(getppid(), name, rank); };
  std::ofstream(file(me)) << "here";
  for (int i = 0; i < 600; ++i) {
    bool everyone = true;
    for (int rank : ranks)
      everyone = everyone && static_cast<bool>(std::ifstream(file(rank)));
    if (everyone) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
}

void rank_check_failed(const char* condition, const char* file, int line,
                       const std::string& detail) {
  std::fprintf(stderr, "rank %s: check failed: %s at %s:%d: %s\n", std::getenv("IBCOLL_RANK"),
               condition, file, line, detail.c_str());
  std::fflush(stderr);
  _exit(1);
}

}  // namespace ibcoll::testing
