#include "runtime/bootstrap/launch_env.h"

#include <cstdlib>

#include "base/status.h"
#include "runtime/config.h"

namespace ibcoll::runtime {
namespace {

const char* const kPairs[][2] = {{"IBCOLL_RANK", "IBCOLL_SIZE"},
                                 {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                 {"PMI_RANK", "PMI_SIZE"},
                                 {"SLURM_PROCID", "SLURM_NTASKS"}};

}  // namespace

bool started_by_launcher(const std::function<const char*(const char*)>& lookup) {
  for (const auto& [rank_name, size_name] : kPairs) {
    if (lookup(rank_name) || lookup(size_name)) return true;
  }
  return false;
}

LaunchInfo launch_info_from_environment(const std::function<const char*(const char*)>& lookup) {
  LaunchInfo info;
  bool found = false;
  for (const auto& [rank_name, size_name] : kPairs) {
    const char* rank = lookup(rank_name);
    const char* size = lookup(size_name);
    if (!rank && !size) continue;
    if (!rank || !size) {
      throw Error(Code::invalid_argument, std::string(rank ? size_name : rank_name) +
                                              " is unset while " + (rank ? rank_name : size_name) +
                                              " is set");
    }
    info.size = static_cast<int>(parse_integer(size_name, size, 1, 1 << 24));
    info.rank = static_cast<int>(parse_integer(rank_name, rank, 0, info.size - 1));
    found = true;
    break;
  }
  if (!found) {
    throw Error(
        Code::invalid_argument,
        "no launcher environment: set IBCOLL_RANK and IBCOLL_SIZE (or run under mpirun/srun)");
  }
  if (const char* secret = lookup("IBCOLL_JOB_SECRET")) info.secret = secret;
  return info;
}

LaunchInfo launch_info_from_environment() {
  return launch_info_from_environment([](const char* name) { return std::getenv(name); });
}

}  // namespace ibcoll::runtime
