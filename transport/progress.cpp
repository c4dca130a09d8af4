#include "transport/progress.h"

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <optional>

#include "base/status.h"

namespace ibcoll::transport {
namespace {
// Longest sleep of the event policy, so a deadline is looked at now and then.
constexpr int kMaxSleepMs = 10;
constexpr int kPollsPerClockRead = 64;  // an idle poll is cheaper than reading the clock
}  // namespace

WaitPolicy parse_wait_policy(const std::string& text) {
  if (text == "spin") return WaitPolicy::spin;
  if (text == "adaptive") return WaitPolicy::adaptive;
  if (text == "event") return WaitPolicy::event;
  throw Error(Code::invalid_argument,
              "IBCOLL_WAIT: unknown policy '" + text + "' (expected spin|adaptive|event)");
}

const char* wait_policy_name(WaitPolicy policy) {
  switch (policy) {
    case WaitPolicy::spin:
      return "spin";
    case WaitPolicy::adaptive:
      return "adaptive";
    case WaitPolicy::event:
      return "event";
  }
  return "?";
}

void ProgressEngine::add(Poller* poller) {
  pollers_.push_back(poller);
}

void ProgressEngine::remove(Poller* poller) {
  std::erase(pollers_, poller);
}

int ProgressEngine::progress() {
  int events = 0;
  for (Poller* p : pollers_)
    events += p->poll();
  return events;
}

void ProgressEngine::wait(FunctionRef<bool()> done, std::chrono::milliseconds budget,
                          const char* what) {
  std::optional<Deadline> deadline;
  int idle = 0;
  uint32_t rounds = 0;
  while (!done()) {
    // Busy or idle: events that keep coming (a peer's traffic for other calls, a host
    // library's progress) must not keep this wait from its deadline.
    if (++rounds % kPollsPerClockRead == 0) {
      if (!deadline) {
        deadline.emplace(budget);
      } else if (deadline->expired()) {
        throw Error(Code::timeout, std::string(what) + " did not complete within " +
                                       std::to_string(budget.count()) + " ms (IBCOLL_TIMEOUT)");
      }
    }
    if (progress() > 0) {
      idle = 0;
      continue;
    }
    ++idle;
    if (policy_ == WaitPolicy::spin || idle < spin_polls_) continue;
    if (!deadline) deadline.emplace(budget);  // spinning may end before the first clock read
    if (policy_ == WaitPolicy::event) {
      sleep_on_events(*deadline);
    } else {
      sched_yield();
    }
  }
}

void ProgressEngine::sleep_on_events(const Deadline& deadline) {
  std::vector<pollfd> fds;
  for (Poller* p : pollers_) {
    int fd = p->arm_event_fd();
    if (fd < 0) return;  // someone cannot sleep: keep polling
    fds.push_back({fd, POLLIN, 0});
  }
  // Events that arrived between the last poll and arming are caught by the poll after this.
  if (progress() > 0) return;
  int ms = static_cast<int>(std::min<long>(deadline.remaining().count(), kMaxSleepMs));
  ::poll(fds.data(), fds.size(), ms);
}

}  // namespace ibcoll::transport
