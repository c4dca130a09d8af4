// Local launch: start N ranks of a job on this machine by forking, for tools and tests run
// without mpirun/srun. Each child gets IBCOLL_RANK/SIZE, a loopback IBCOLL_BOOTSTRAP address
// and a fresh IBCOLL_JOB_SECRET, runs body(rank, size) and exits with what it returns (an
// escaping exception is printed and exits 3). Children still running at the deadline are
// killed. Fork before any verbs call in the parent: registered memory and fork do not mix.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace ibcoll::runtime {

struct RankExit {
  int exit_code = -1;  // when the rank exited
  int signal = 0;      // when a signal ended it
  bool timed_out = false;
  bool ok() const { return exit_code == 0 && signal == 0 && !timed_out; }
};

struct LaunchOptions {
  std::chrono::seconds deadline{120};
  std::map<std::string, std::string> environment;  // extra variables for every rank
};

std::vector<RankExit> launch_local_ranks(int size,
                                         const std::function<int(int rank, int size)>& body,
                                         const LaunchOptions& options = {});

// A TCP port on 127.0.0.1 that was free a moment ago, for a TCP store on this machine.
int free_loopback_port();
// A fresh IBCOLL_JOB_SECRET.
std::string random_secret();

// "rank 0: exit 0; rank 1: signal 9; ..." for messages.
std::string describe(const std::vector<RankExit>& exits);

}  // namespace ibcoll::runtime
