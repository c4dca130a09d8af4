#include "transport/shm/process.h"

#include <signal.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace ibcoll::transport::shm {

bool process_alive(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;  // cannot tell: assume alive
  const auto state = line.rfind(") ");         // the name may hold spaces and parentheses
  return state == std::string::npos || line[state + 2] != 'Z';
}

}  // namespace ibcoll::transport::shm
