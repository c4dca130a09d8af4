// LaunchInfo: who this process is in the job, read from the launcher's environment:
// IBCOLL_RANK/IBCOLL_SIZE first, then Open MPI's, PMI's and Slurm's variables.
#pragma once

#include <functional>
#include <string>

namespace ibcoll::runtime {

struct LaunchInfo {
  int rank = 0;
  int size = 1;
  std::string secret;  // IBCOLL_JOB_SECRET
};

// Whether a launcher's rank or size variable (of those above) is set at all.
bool started_by_launcher(const std::function<const char*(const char*)>& lookup);

// Throws Error(invalid_argument) naming the variable when rank/size are missing or bad.
LaunchInfo launch_info_from_environment(const std::function<const char*(const char*)>& lookup);
LaunchInfo launch_info_from_environment();

}  // namespace ibcoll::runtime
