#include "runtime/bootstrap/local_launch.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <random>
#include <thread>

namespace ibcoll::runtime {

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t length = sizeof(addr);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length);
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string random_secret() {
  std::random_device rd;
  char text[33];
  std::snprintf(text, sizeof(text), "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return text;
}

std::vector<RankExit> launch_local_ranks(int size, const std::function<int(int, int)>& body,
                                         const LaunchOptions& options) {
  const std::string address = "127.0.0.1:" + std::to_string(free_loopback_port());
  const std::string secret = random_secret();
  std::fflush(nullptr);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < size; ++rank) {
    pid_t pid = fork();
    if (pid == 0) {
      setenv("IBCOLL_RANK", std::to_string(rank).c_str(), 1);
      setenv("IBCOLL_SIZE", std::to_string(size).c_str(), 1);
      setenv("IBCOLL_BOOTSTRAP", address.c_str(), 1);
      setenv("IBCOLL_JOB_SECRET", secret.c_str(), 1);
      for (const auto& [name, value] : options.environment)
        setenv(name.c_str(), value.c_str(), 1);
      int code = 3;
      try {
        code = body(rank, size);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d: uncaught exception: %s\n", rank, e.what());
      }
      std::fflush(nullptr);
      _exit(code);
    }
    pids.push_back(pid);
  }

  std::vector<RankExit> exits(static_cast<size_t>(size));
  const auto deadline = std::chrono::steady_clock::now() + options.deadline;
  size_t running = pids.size();
  while (running > 0) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (pids[i] < 0) continue;
      int status = 0;
      if (waitpid(pids[i], &status, WNOHANG) != pids[i]) continue;
      if (WIFEXITED(status)) exits[i].exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) exits[i].signal = WTERMSIG(status);
      pids[i] = -1;
      --running;
    }
    if (running > 0 && std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (pids[i] < 0) continue;
        kill(pids[i], SIGKILL);
        waitpid(pids[i], nullptr, 0);
        exits[i].timed_out = true;
        pids[i] = -1;
        --running;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return exits;
}

std::string describe(const std::vector<RankExit>& exits) {
  std::string text;
  for (size_t r = 0; r < exits.size(); ++r) {
    const RankExit& e = exits[r];
    text += "rank " + std::to_string(r) + ": ";
    if (e.timed_out)
      text += "killed at the test deadline";
    else if (e.signal)
      text += "signal " + std::to_string(e.signal);
    else
      text += "exit " + std::to_string(e.exit_code);
    text += "; ";
  }
  return text;
}

}  // namespace ibcoll::runtime
