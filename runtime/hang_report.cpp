#include "runtime/hang_report.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <ctime>

#include "base/log.h"

namespace ibcoll::runtime {
namespace {

std::atomic<bool> requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "set from a signal handler");

void on_signal(int) {
  requested.store(true, std::memory_order_relaxed);
}

std::string expand(const std::string& pattern, int rank) {
  std::string path;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() &&
        (pattern[i + 1] == 'r' || pattern[i + 1] == 'p')) {
      path += std::to_string(pattern[++i] == 'r' ? rank : static_cast<int>(getpid()));
    } else {
      path += pattern[i];
    }
  }
  return path;
}

}  // namespace

void install_hang_report_signal() {
  struct sigaction current {};
  if (sigaction(SIGUSR1, nullptr, &current) != 0) return;
  // The program's own handler (or SIG_IGN) stays; so does ours, once installed.
  if ((current.sa_flags & SA_SIGINFO) || current.sa_handler != SIG_DFL) return;
  struct sigaction ours {};
  ours.sa_handler = on_signal;
  ours.sa_flags = SA_RESTART;
  sigemptyset(&ours.sa_mask);
  sigaction(SIGUSR1, &ours, nullptr);
}

bool hang_report_requested() {
  return requested.load(std::memory_order_relaxed) &&
         requested.exchange(false, std::memory_order_relaxed);
}

void write_hang_report(const std::string& destination, int rank,
                       const std::vector<std::string>& calls) {
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof(host) - 1);
  const std::time_t now = std::time(nullptr);
  char when[32] = {};
  std::strftime(when, sizeof(when), "%F %T", std::localtime(&now));
  std::string text = "ibcoll hang report: rank " + std::to_string(rank) + ", pid " +
                     std::to_string(getpid()) + " on " + host + ", " + when + ": " +
                     std::to_string(calls.size()) + " call(s) in flight\n";
  for (const std::string& call : calls)
    text += "  " + call + "\n";
  const int fd = destination.empty()
                     ? STDERR_FILENO
                     : ::open(expand(destination, rank).c_str(),
                              O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) {
    IBCOLL_LOG(warn, "cannot write the hang report to " << expand(destination, rank));
    return;
  }
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  if (fd != STDERR_FILENO) ::close(fd);
}

}  // namespace ibcoll::runtime
