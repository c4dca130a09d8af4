// ProgressEngine: waits drive every poller, honour the deadline, and parse their policy.
#include <gtest/gtest.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>

#include "base/status.h"
#include "transport/progress.h"

namespace ibcoll::transport {
namespace {

struct CountingPoller : Poller {
  int polls = 0;
  int events_at = -1;  // report an event on this poll
  int poll() override { return ++polls == events_at ? 1 : 0; }
};

TEST(Progress, WaitPollsUntilDone) {
  ProgressEngine engine(WaitPolicy::spin);
  CountingPoller a, b;
  engine.add(&a);
  engine.add(&b);
  engine.wait([&] { return a.polls >= 10; }, std::chrono::seconds(5), "ten polls");
  EXPECT_EQ(a.polls, 10);
  EXPECT_EQ(b.polls, 10);
  engine.remove(&b);
  EXPECT_EQ(engine.progress(), 0);
  EXPECT_EQ(b.polls, 10);
}

TEST(Progress, WaitThrowsTimeoutNamingTheOperation) {
  for (auto policy : {WaitPolicy::spin, WaitPolicy::adaptive, WaitPolicy::event}) {
    ProgressEngine engine(policy);
    CountingPoller p;
    engine.add(&p);
    try {
      engine.wait([] { return false; }, std::chrono::milliseconds(30), "never");
      FAIL() << "no timeout";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::timeout);
      EXPECT_NE(std::string(e.what()).find("never"), std::string::npos);
    }
    EXPECT_GT(p.polls, 0);
  }
}

// A poller that could sleep on a file descriptor that never becomes readable.
struct SleepyPoller : Poller {
  int fd = eventfd(0, EFD_NONBLOCK);
  ~SleepyPoller() override { close(fd); }
  int poll() override { return 0; }
  int arm_event_fd() override { return fd; }
};

// Ranks outnumber cores: a wait spins one round, then yields or sleeps, long before its first
// clock read; it must still end at its deadline.
TEST(Progress, WaitThatStopsSpinningAtOnceStillTimesOut) {
  for (auto policy : {WaitPolicy::adaptive, WaitPolicy::event}) {
    ProgressEngine engine(policy);
    engine.set_spin_polls(ProgressEngine::kOversubscribedSpinPolls);
    SleepyPoller p;
    ASSERT_GE(p.fd, 0);
    engine.add(&p);
    const auto start = std::chrono::steady_clock::now();
    EXPECT_THROW(engine.wait([] { return false; }, std::chrono::milliseconds(50), "sleepy"), Error);
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
}

// A poller that reports an event on every poll (traffic for other calls, say): a wait whose
// own condition never holds still ends at its deadline, where it used to spin for ever.
struct BusyPoller : Poller {
  int poll() override { return 1; }
};

TEST(Progress, WaitAmongEndlessEventsStillTimesOut) {
  for (auto policy : {WaitPolicy::spin, WaitPolicy::adaptive, WaitPolicy::event}) {
    ProgressEngine engine(policy);
    BusyPoller p;
    engine.add(&p);
    EXPECT_THROW(engine.wait([] { return false; }, std::chrono::milliseconds(50), "busy"), Error);
  }
}

TEST(Progress, ParsesPolicies) {
  EXPECT_EQ(parse_wait_policy("spin"), WaitPolicy::spin);
  EXPECT_EQ(parse_wait_policy("event"), WaitPolicy::event);
  EXPECT_THROW(parse_wait_policy("busy"), Error);
}

}  // namespace
}  // namespace ibcoll::transport
