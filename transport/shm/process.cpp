#include "transport/shm/process.h"

#include <signal.h>
#include <sys/uio.h>

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

int read_process_memory(pid_t pid, uint64_t address, std::byte* into, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {  // the kernel may stop short (a page boundary it could not pin)
    iovec local{into + done, bytes - done};
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the address is in the other process
    iovec remote{reinterpret_cast<void*>(address + done), bytes - done};
    const ssize_t got = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got < 0) return errno;
    if (got == 0) return EFAULT;
    done += static_cast<size_t>(got);
  }
  return 0;
}

}  // namespace ibcoll::transport::shm
