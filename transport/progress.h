// Progress engine: polling-driven and single-threaded. progress() polls every registered
// Poller once and returns how many events ran; wait() loops progress() until a condition holds
// or the deadline passes, spinning, yielding or sleeping according to the wait policy.
#pragma once

#include <functional>
#include <vector>

#include "base/deadline.h"
#include "base/function_ref.h"

namespace ibcoll::transport {

enum class WaitPolicy {
  spin,      // poll continuously: lowest latency, burns the core
  adaptive,  // spin a while, then yield the core between polls (ranks may outnumber cores)
  event,     // spin a while, then sleep on the pollers' file descriptors until an event
};

WaitPolicy parse_wait_policy(const std::string& text);  // throws Error(invalid_argument)
const char* wait_policy_name(WaitPolicy policy);

class Poller {
 public:
  virtual ~Poller() = default;
  // Handle whatever completed; return the number of events handled. Never blocks.
  virtual int poll() = 0;
  // For the event policy: arm notification and return an fd that becomes readable on the next
  // event, or -1 if this poller cannot sleep (then the engine keeps polling it).
  virtual int arm_event_fd() { return -1; }
};

// A Poller over a function: lets a host library's own progress (Open MPI's opal_progress) run
// inside every ibcoll wait, so its traffic keeps moving while ibcoll waits.
class FunctionPoller final : public Poller {
 public:
  explicit FunctionPoller(std::function<int()> poll) : poll_(std::move(poll)) {}
  int poll() override { return poll_(); }

 private:
  std::function<int()> poll_;
};

class ProgressEngine {
 public:
  explicit ProgressEngine(WaitPolicy policy = WaitPolicy::adaptive) : policy_(policy) {}

  void add(Poller* poller);
  void remove(Poller* poller);
  int progress();

  // Drives progress until done() is true. Throws Error(timeout) naming `what` once `budget`
  // has passed, however busy the pollers are. The clock is read every few rounds, the first
  // time a few rounds in (reading it costs more than a poll), so a wait that completes at once
  // never touches it.
  void wait(FunctionRef<bool()> done, std::chrono::milliseconds budget, const char* what);

  WaitPolicy policy() const { return policy_; }
  // Idle polls before an adaptive or event wait yields or sleeps. Short when ranks outnumber
  // cores: a waiting rank must hand its core to the rank it waits for.
  void set_spin_polls(int polls) { spin_polls_ = polls; }
  static constexpr int kDefaultSpinPolls = 2000;  // ≈100 µs of polling
  // Ranks outnumber cores: one round (a peer that runs answers within it), then yield.
  static constexpr int kOversubscribedSpinPolls = 1;

 private:
  void sleep_on_events(const Deadline& deadline);

  WaitPolicy policy_;
  int spin_polls_ = kDefaultSpinPolls;
  std::vector<Poller*> pollers_;
};

}  // namespace ibcoll::transport
