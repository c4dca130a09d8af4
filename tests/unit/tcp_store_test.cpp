// TcpStore across real forked processes on loopback: allgather/barrier, waiting gets, the
// job secret, deadlines, and clients that misbehave (strangers, a client that stops reading,
// signals during a wait).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "base/status.h"
#include "runtime/bootstrap/launch_env.h"
#include "runtime/bootstrap/tcp_store.h"
#include "tests/support/forked_ranks.h"

namespace ibcoll::runtime {
namespace {

using testing::describe;
using testing::run_ranks;

TcpStore open_store(std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  LaunchInfo info = launch_info_from_environment();
  return TcpStore(std::getenv("IBCOLL_BOOTSTRAP"), info.rank, info.size, info.secret, timeout);
}

// A get of a key nobody sets ends with a timeout error.
void expect_get_times_out(TcpStore& store) {
  try {
    store.get("never-set");
    RANK_CHECK(false, "get of a missing key returned");
  } catch (const Error& e) {
    RANK_CHECK(e.status().code() == Code::timeout, e.what());
  }
}

TEST(TcpStore, AllgatherAndBarrierAcrossProcesses) {
  auto exits = run_ranks(5, [](int rank, int size) {
    TcpStore store = open_store();
    auto all = store.allgather("names", "rank-" + std::to_string(rank));
    RANK_CHECK(all.size() == static_cast<size_t>(size), "allgather size");
    for (int r = 0; r < size; ++r)
      RANK_CHECK(all[r] == "rank-" + std::to_string(r), all[r]);
    // A get issued before the set waits for it.
    if (rank == 1) store.set("late", std::string(100000, 'z'));
    RANK_CHECK(store.get("late") == std::string(100000, 'z'), "late value");
    store.barrier("done");
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// A client of the store speaking the wire format by hand, as a stranger on the network would.
class RawClient {
 public:
  RawClient() {
    auto [host, port] = parse_host_port(std::getenv("IBCOLL_BOOTSTRAP"));
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, host.c_str(), &address.sin_addr);
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    for (int i = 0; i < 200; ++i) {
      if (connect(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    RANK_CHECK(false, "cannot reach the store");
  }
  ~RawClient() { close(fd_); }
  // A frame as the store's: u32 length, op, body.
  void send_frame(char op, const std::string& body) { send_bytes(frame(op, body)); }
  void send_bytes(const std::string& bytes) {
    RANK_CHECK(
        ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size()),
        "send");
  }
  static std::string frame(char op, const std::string& body) {
    const uint32_t length = static_cast<uint32_t>(body.size() + 1);
    std::string out(reinterpret_cast<const char*>(&length), 4);
    return out + op + body;
  }
  // Whether the store closes this connection within `wait` (reading and dropping replies).
  bool closed_within(std::chrono::milliseconds wait) {
    const auto end = std::chrono::steady_clock::now() + wait;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      char chunk[4096];
      if (recv(fd_, chunk, sizeof(chunk), 0) <= 0) return true;
    }
    return false;
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

// A stranger presenting a wrong secret is turned away, and what it sent along with its hello
// (a value under a key the job uses) never reaches the store.
TEST(TcpStore, WrongSecretIsRejected) {
  auto exits = run_ranks(2, [](int rank, int) {
    if (rank == 1) {
      RawClient stranger;
      std::string key = "stolen";
      const uint32_t key_length = static_cast<uint32_t>(key.size());
      stranger.send_bytes(
          RawClient::frame('H', "not-the-secret") +
          RawClient::frame(
              'S', std::string(reinterpret_cast<const char*>(&key_length), 4) + key + "forged"));
      RANK_CHECK(stranger.closed_within(std::chrono::seconds(5)), "a wrong secret was kept");
    }
    if (rank == 1) setenv("IBCOLL_JOB_SECRET", "not-the-secret", 1);
    try {
      TcpStore store = open_store(std::chrono::seconds(3));
      if (rank == 1) RANK_CHECK(false, "joined with a wrong secret");
      try {  // rank 0 serves: nothing of the strangers' is there
        store.get("stolen");
        RANK_CHECK(false, "a rejected client's value reached the store");
      } catch (const Error& e) {
        RANK_CHECK(e.status().code() == Code::timeout, e.what());
      }
    } catch (const Error& e) {
      RANK_CHECK(rank == 1, e.what());
      RANK_CHECK(std::string(e.what()).find("IBCOLL_JOB_SECRET") != std::string::npos, e.what());
    }
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// Before the secret, a stranger can make the store hold neither much memory nor a connection
// for long: a frame announcing 60 MiB is refused at once, and a silent connection is closed
// after the store's timeout (here 1 s).
TEST(TcpStore, StrangersAreBoundedInSizeAndTime) {
  auto exits = run_ranks(2, [](int rank, int) {
    if (rank == 0) {  // serves, with a timeout of 1 s
      TcpStore store = open_store(std::chrono::seconds(1));
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return 0;
    }
    RawClient big, silent;
    const uint32_t huge = 60u << 20;
    big.send_bytes(std::string(reinterpret_cast<const char*>(&huge), 4) + "H");
    RANK_CHECK(big.closed_within(std::chrono::milliseconds(500)),
               "a 60 MiB frame before the secret was not refused");
    RANK_CHECK(silent.closed_within(std::chrono::milliseconds(2500)),
               "a silent stranger was kept past the store's timeout");
    TcpStore store = open_store(std::chrono::seconds(10));  // still serving the job
    store.set("mine", "1");
    RANK_CHECK(store.get("mine") == "1", "the store after the strangers");
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// A client that asks for a large value again and again and never reads the replies: the store
// keeps them in that client's buffer (and drops it past a bound) instead of blocking in a
// write, so the other ranks' exchanges go on.
TEST(TcpStore, AStalledClientStallsNobody) {
  auto exits = run_ranks(3, [](int rank, int) {
    TcpStore store = open_store(std::chrono::seconds(10));
    if (rank == 1) store.set("big", std::string(4 << 20, 'b'));
    store.barrier("big is set");
    if (rank == 2) {
      RawClient reader_that_never_reads;
      reader_that_never_reads.send_frame('H', std::getenv("IBCOLL_JOB_SECRET"));
      for (int i = 0; i < 32; ++i)  // 128 MiB of replies, far beyond the socket's buffers
        reader_that_never_reads.send_frame('G', "big");
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      store.barrier("still served");
    } else {
      store.barrier("still served");
    }
    for (int i = 0; i < 20; ++i)
      store.allgather("round-" + std::to_string(i), std::to_string(rank));
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// A rank that exits without finalizing (no goodbye on its connection to the store): the ranks
// waiting in an exchange it will never join (a barrier: an allgather the store completes) fail
// at once, naming it, instead of at the deadline (60 s here); gets of values set before still
// succeed.
TEST(TcpStore, ARankThatExitsWithoutFinalizingFailsTheWaiters) {
  auto exits = run_ranks(3, [](int rank, int) {
    TcpStore store = open_store(std::chrono::seconds(60));
    store.set("set before/" + std::to_string(rank), "kept");
    store.barrier("everyone joined");
    if (rank == 2) _exit(3);  // no destructor: no goodbye, as in a crash or a plain exit()
    const auto start = std::chrono::steady_clock::now();
    try {
      store.barrier("finalize");
      RANK_CHECK(false, "the barrier passed without rank 2");
    } catch (const Error& e) {
      RANK_CHECK(e.status().code() == Code::peer_failed, e.what());
      RANK_CHECK(std::string(e.what()).find("rank 2 left the job") != std::string::npos, e.what());
    }
    RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10),
               "the waiters learned of it only at the deadline");
    RANK_CHECK(store.get("set before/2") == "kept", "a value set before the loss");
    return 0;
  });
  ASSERT_EQ(exits.size(), 3u);
  EXPECT_TRUE(exits[0].ok() && exits[1].ok()) << describe(exits);
}

// Signals arriving while a client waits for the store (a profiler's timer, say) do not make it
// wait without a deadline: the get still ends at the timeout.
TEST(TcpStore, AWaitInterruptedBySignalsStillTimesOut) {
  auto exits = run_ranks(1, [](int, int) {
    struct sigaction action {};
    action.sa_handler = [](int) {};  // no SA_RESTART: poll and recv return EINTR
    sigaction(SIGALRM, &action, nullptr);
    const itimerval every_5ms{{0, 5000}, {0, 5000}};
    setitimer(ITIMER_REAL, &every_5ms, nullptr);
    TcpStore store = open_store(std::chrono::milliseconds(300));
    expect_get_times_out(store);
    const itimerval off{};
    setitimer(ITIMER_REAL, &off, nullptr);
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// A store whose host never answers the connection (here: a listener whose queue is full, so the
// kernel drops the SYN, as a dead node or a lost network would): the client fails at its
// deadline, where a blocking connect waited out the kernel's SYN retries, over two minutes.
TEST(TcpStore, AStoreThatNeverAnswersTheConnectionFailsAtTheDeadline) {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(::listen(listener, 0), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  std::vector<int> queued;  // connections the listener never accepts, until one is not answered
  for (bool answered = true; answered && queued.size() < 16;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    queued.push_back(fd);
    ::connect(fd, reinterpret_cast<sockaddr*>(&address), size);
    pollfd p{fd, POLLOUT, 0};
    answered = ::poll(&p, 1, 200) > 0;
  }
  ASSERT_LT(queued.size(), 16u) << "the listener's queue never filled";
  const auto start = std::chrono::steady_clock::now();
  try {
    TcpStore("127.0.0.1:" + std::to_string(ntohs(address.sin_port)), 1, 2, "secret",
             std::chrono::milliseconds(1500));
    ADD_FAILURE() << "connected to a store that never answered";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::timeout) << e.what();
    EXPECT_NE(std::string(e.what()).find("cannot reach the TCP store"), std::string::npos)
        << e.what();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  for (int fd : queued)
    ::close(fd);
  ::close(listener);
}

TEST(TcpStore, MissingKeyTimesOutAndBadAddressIsNamed) {
  auto exits = run_ranks(1, [](int, int) {
    TcpStore store = open_store(std::chrono::milliseconds(300));
    expect_get_times_out(store);
    try {
      store.get("another");
      RANK_CHECK(false, "the store was used after a timeout");
    } catch (const Error& e) {
      RANK_CHECK(
          std::string(e.what()).find("unusable after an earlier timeout") != std::string::npos,
          e.what());
    }
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
  EXPECT_THROW(parse_host_port("localhost"), Error);
  EXPECT_THROW(parse_host_port("localhost:99999"), Error);
  EXPECT_EQ(parse_host_port("[::1]:80").first, "::1");
}

// A store other hosts can reach trusts whoever presents the secret: a short or missing one is
// refused before any connection, naming the variable; on loopback none is needed.
TEST(TcpStore, AShortSecretIsRefusedUnlessTheStoreIsOnLoopback) {
  for (const char* address : {"192.0.2.1:29500", "[2001:db8::1]:29500"}) {
    for (const char* secret : {"", "fifteen chars.."}) {  // 15: one short
      SCOPED_TRACE(std::string(address) + " with secret '" + secret + "'");
      const auto start = std::chrono::steady_clock::now();
      try {
        TcpStore(address, 1, 2, secret, std::chrono::seconds(30));
        ADD_FAILURE() << "accepted";
      } catch (const Error& e) {
        EXPECT_EQ(e.status().code(), Code::invalid_argument) << e.what();
        EXPECT_NE(std::string(e.what()).find("IBCOLL_JOB_SECRET"), std::string::npos) << e.what();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
    }
  }
  // Sixteen characters are enough anywhere (no connection attempt fails on the secret here: the
  // address only times out).
  try {
    TcpStore("192.0.2.1:29500", 1, 2, "sixteen chars...", std::chrono::milliseconds(300));
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::timeout) << e.what();
  }
  auto exits = run_ranks(2, [](int rank, int size) {
    TcpStore store(std::getenv("IBCOLL_BOOTSTRAP"), rank, size, "", std::chrono::seconds(20));
    const auto all = store.allgather("no secret", std::to_string(rank));
    RANK_CHECK(all.size() == 2 && all[0] == "0" && all[1] == "1", "allgather without a secret");
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// Fewer ranks started than the job's size: an allgather fails at every rank in it, naming the
// ranks missing, before their own deadline (where they would only know that no answer came);
// a rank that comes after the store gave up gets the same answer at once, not a new wait.
TEST(TcpStore, AnAllgatherRanksNeverJoinFailsNamingThem) {
  auto exits = run_ranks(2, [](int rank, int) {
    TcpStore store(std::getenv("IBCOLL_BOOTSTRAP"), rank, 3, std::getenv("IBCOLL_JOB_SECRET"),
                   std::chrono::milliseconds(2000));
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(2300));
    const auto start = std::chrono::steady_clock::now();
    try {
      store.allgather("start", "mine");
      RANK_CHECK(false, "an allgather without rank 2 completed");
    } catch (const Error& e) {
      RANK_CHECK(e.status().code() == Code::peer_failed, e.what());
      RANK_CHECK(std::string(e.what()).find("allgather start: 1 of 3 ranks gave their part in "
                                            "1800 ms, never rank 1, 2") != std::string::npos,
                 e.what());
    }
    if (rank == 1) {
      RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1000),
                 "the late rank waited again");
    }
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// The job's next store at the same address (a process that finalizes and initializes again):
// a rank that opens its next store while rank 0's previous server still serves the others'
// goodbyes is told to come back, not taken in, so it neither stalls that server's end (which
// waited for it to hang up, until the timeout) nor gives its parts to the store that is going.
TEST(TcpStore, TheNextStoreAtTheSameAddressIsNotConfusedWithThePreviousOne) {
  auto exits = run_ranks(3, [](int rank, int) {
    const auto timeout = std::chrono::milliseconds(5000);
    {
      TcpStore first = open_store(timeout);
      first.barrier("first");
      // Rank 0, whose store serves, leaves last: the others open their next one meanwhile.
      if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    const auto start = std::chrono::steady_clock::now();
    TcpStore next = open_store(timeout);
    const auto all = next.allgather("next", "part-" + std::to_string(rank));
    for (size_t r = 0; r < all.size(); ++r)
      RANK_CHECK(all[r] == "part-" + std::to_string(r), "the next store's allgather: " + all[r]);
    RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::milliseconds(3000),
               "the next store waited for the previous one to time out");
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

// A store that closes a rank's connection before answering it is one on its way out (the job's
// previous store ended just as the rank connected: the connection was still in its queue, or it
// took it and then ended), so the rank tries again and joins the next store at the address.
// Rank 0 stands in for the previous store: it takes rank 1's first connection, reads its hello
// and closes it unanswered, then opens the real store.
TEST(TcpStore, AConnectionClosedBeforeAnyAnswerIsTriedAgain) {
  auto exits = run_ranks(2, [](int rank, int) {
    if (rank == 0) {
      auto [host, port] = parse_host_port(std::getenv("IBCOLL_BOOTSTRAP"));
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<uint16_t>(port));
      inet_pton(AF_INET, host.c_str(), &address.sin_addr);
      const int listener = socket(AF_INET, SOCK_STREAM, 0);
      const int one = 1;
      setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      RANK_CHECK(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0,
                 "bind");
      RANK_CHECK(listen(listener, 4) == 0, "listen");
      const int first = accept(listener, nullptr, nullptr);
      RANK_CHECK(first >= 0, "accept");
      char hello[256];
      RANK_CHECK(recv(first, hello, sizeof(hello), 0) > 0, "rank 1's hello");
      close(first);
      close(listener);
    }
    TcpStore store = open_store(std::chrono::seconds(10));
    const auto all = store.allgather("after", "part-" + std::to_string(rank));
    for (size_t r = 0; r < all.size(); ++r)
      RANK_CHECK(all[r] == "part-" + std::to_string(r), "the allgather after: " + all[r]);
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << describe(exits);
}

}  // namespace
}  // namespace ibcoll::runtime
