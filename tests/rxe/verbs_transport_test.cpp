// The verbs transport against a real verbs stack (Soft-RoCE in the VM: ci/rxe-vm). Every
// scenario forks its ranks before any verbs call, so each runs as real separate processes.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "base/log.h"
#include "base/status.h"
#include "runtime/verbs_endpoint.h"
#include "tests/support/exchange.h"
#include "tests/support/forked_ranks.h"
#include "tests/support/heap_count.h"
#include "transport/verbs/completion_queue.h"
#include "transport/verbs/device.h"
#include "transport/verbs/mr_cache.h"
#include "transport/verbs/queue_pair.h"
#include "transport/verbs/receive_queue.h"
#include "transport/verbs/xrc_domain.h"

namespace ibcoll::testing {
namespace {

using transport::verbs::live_objects;

// What `body` logs (ibcoll's log goes to stderr).
std::string log_of(const std::function<void()>& body) {
  char path[] = "/tmp/ibcoll-log-XXXXXX";
  const int fd = mkstemp(path);
  const int saved_stderr = dup(2);
  dup2(fd, 2);
  body();
  dup2(saved_stderr, 2);
  close(saved_stderr);
  close(fd);
  std::ifstream in(path);
  std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  unlink(path);
  return log;
}

// The all-to-all exchange over verbs, then the one-SRQ-per-process and on-demand rules.
int all_to_all(const std::vector<size_t>& sizes) {
  runtime::VerbsEndpoint r;
  const int n = r.size();
  exchange_all_to_all(r, r.channel(), sizes);
  const auto c = r.channel().counters();
  RANK_CHECK(c.shared_receive_queues == 1 && live_objects().srqs == 1,
             "one SRQ per process, found " + std::to_string(live_objects().srqs));
  RANK_CHECK(c.connections == static_cast<uint64_t>(n - 1),
             "connections: " + std::to_string(c.connections));
  RANK_CHECK(c.failed_peers == 0, "a peer failed");
  r.bootstrap().barrier("end");
  return 0;
}

void expect_all_to_all(int ranks, const std::vector<size_t>& sizes,
                       std::map<std::string, std::string> environment = {}) {
  RankOptions options;
  options.environment = std::move(environment);
  expect_all_ok(run_ranks(
      ranks, [&](int, int) { return all_to_all(sizes); }, options));
}

TEST(VerbsTransport, AllToAllTwoRanksZeroTo16MiB) {
  expect_all_to_all(2, {0, 1, 100, 8192, 8193, 65536, (1 << 20) + 3, 16 << 20});
}

// A rendezvous longer than a write chunk (1 MiB, or the port's largest message) goes in
// chunks, each an RDMA write with immediate that takes a credit: with one credit per peer they
// go one at a time, each as the last one's credit comes back, and every byte arrives (they used
// to wait for all the chunks' credits at once, for ever).
TEST(VerbsTransport, AWriteOfMoreChunksThanCreditsGoesAsCreditsComeBack) {
  RankOptions options;
  options.environment["IBCOLL_CREDITS"] = "1";
  expect_all_ok(run_ranks(
      2,
      [](int, int) {
        runtime::VerbsEndpoint r;
        const size_t chunk = std::min<size_t>(r.channel().device().max_message_size(),
                                              transport::verbs::VerbsChannel::kWriteChunkBytes);
        exchange_all_to_all(r, r.channel(), {2 * chunk + 5});
        r.bootstrap().barrier("end");
        return 0;
      },
      options));
}

// Four ranks on two CPUs, waiting by sleeping on the completion channel (IBCOLL_WAIT=event).
TEST(VerbsTransport, AllToAllFourRanksSleepingOnEvents) {
  expect_all_to_all(4, {0, 7, 4096, 8193, 300000, (1 << 20) + 5}, {{"IBCOLL_WAIT", "event"}});
}

TEST(VerbsTransport, AllToAllEightRanksWithRegistrationCache) {
  expect_all_to_all(8, {0, 1, 8192, 20000, 100000}, {{"IBCOLL_MR_CACHE", "1"}});
}

// The same exchange with connections made through librdmacm; every rank connects to every
// other at once, so simultaneous connects from both sides are exercised too. Under
// AddressSanitizer without the 16 MiB messages (two thirds of its 65 s there): their chunks
// take the 1 MiB message's paths, and the connections are what this test is for.
TEST(VerbsTransport, AllToAllOverRdmaCm) {
#if defined(__SANITIZE_ADDRESS__)
  expect_all_to_all(3, {0, 1, 8192, 8193, (1 << 20) + 3}, {{"IBCOLL_CM", "rdmacm"}});
#else
  expect_all_to_all(3, {0, 1, 8192, 8193, (1 << 20) + 3, 16 << 20}, {{"IBCOLL_CM", "rdmacm"}});
#endif
}

// Seven senders push `messages` small messages each into one receiver whose SRQ holds
// `srq_depth` buffers (a quarter kept for credit returns, the rest lent by its CreditLedger):
// nothing is lost or reordered, no peer fails, the senders did wait for credits, and where
// there are more senders than credits the receiver took some back to lend in turn. A sender
// that is done keeps polling until the receiver says it has everything, as a rank waiting in a
// call does: with more peers than credits, the credits it holds come back only through its
// progress. Whether the queue could have run dry, RNR retries would hide from the senders: the
// receiver counts every credit it sent while fewer buffers were posted than credits were out
// (a ledger that over-lends, or credits returned ahead of their buffers), and there must be none.
void many_to_one(int srq_depth, int messages, RankOptions options) {
  constexpr size_t kBytes = 32;
  options.environment["IBCOLL_SRQ_DEPTH"] = std::to_string(srq_depth);
  auto exits = run_ranks(
      8,
      [&](int, int) {
        runtime::VerbsEndpoint r;
        const int me = r.rank();
        int completed = 0;
        std::vector<Status> failures;
        auto count = [&](const Status& s, size_t) {
          ++completed;
          if (!s.ok()) failures.push_back(s);
        };
        std::vector<std::byte> data(size_t(messages) * (me == 0 ? 7 : 1) * kBytes);
        uint64_t done = 1;
        if (me == 0) {
          for (int peer = 1; peer < 8; ++peer) {
            for (int m = 0; m < messages; ++m)
              r.channel().recv(peer, m, &data[((peer - 1) * size_t(messages) + m) * kBytes], kBytes,
                               count);
          }
          r.wait([&] { return completed == messages * 7; }, "the senders' messages");
          for (int peer = 1; peer < 8; ++peer) {
            for (int m = 0; m < messages; ++m) {
              for (size_t i = 0; i < kBytes; ++i) {
                RANK_CHECK(data[((peer - 1) * size_t(messages) + m) * kBytes + i] ==
                               pattern_byte(peer, 0, m, i),
                           "message " + std::to_string(m) + " from " + std::to_string(peer));
              }
            }
          }
          const auto c = r.channel().counters();
          RANK_CHECK(c.srq_depth == uint64_t(srq_depth),
                     "SRQ depth " + std::to_string(c.srq_depth));
          RANK_CHECK(c.credit_messages > 0, "no credit was returned");
          RANK_CHECK(c.credit_overdrafts == 0,
                     std::to_string(c.credit_overdrafts) +
                         " credits sent with fewer buffers posted than credits out");
          if (uint64_t(srq_depth) * 3 / 4 < 7) {
            RANK_CHECK(c.credit_recalls > 0, "more senders than credits, and none taken back");
          }
          for (int peer = 1; peer < 8; ++peer)
            r.channel().send(peer, messages, &done, sizeof(done), count);
          r.wait([&] { return completed == messages * 7 + 7; }, "telling the senders");
        } else {
          for (int m = 0; m < messages; ++m) {
            std::byte* slot = &data[size_t(m) * kBytes];
            for (size_t i = 0; i < kBytes; ++i)
              slot[i] = pattern_byte(me, 0, m, i);
            r.channel().send(0, m, slot, kBytes, count);
          }
          r.wait([&] { return completed == messages; }, "sending");
          RANK_CHECK(r.channel().counters().credit_stalls > 0, "never waited for a credit");
          r.channel().recv(0, messages, &done, sizeof(done), count);
          r.wait([&] { return completed == messages + 1; }, "the receiver's word");
        }
        RANK_CHECK(failures.empty(), failures.empty() ? "" : failures.front().to_string());
        RANK_CHECK(r.channel().counters().failed_peers == 0, "a peer failed");
        r.bootstrap().barrier("end");
        return 0;
      },
      options);
  expect_all_ok(exits);
}

// 64 buffers, 48 credits: six each for the seven senders.
TEST(VerbsTransport, ManyToOneBurstIntoSmallSrq) {
  RankOptions options;
  // 70 000 messages through emulated RDMA take minutes in the sanitizer build.
  options.environment["IBCOLL_TIMEOUT"] = "280s";
  options.deadline = std::chrono::seconds(300);
  many_to_one(64, 10000, options);
}

// 8 buffers, 6 credits: more peers than credits, so they take turns.
TEST(VerbsTransport, MorePeersThanCreditsTakeTurns) {
  many_to_one(8, 300, RankOptions{});
}

// Rank 1 connects to rank 0 first and is lent 3 of its 6 credits (a share is kept for the next
// peer), then goes idle (polling, as a rank waiting in a call does). Rank 2 connects and starts
// with the share kept for it; the shares shrink to 2, so rank 0 recalls rank 1's excess, which
// rank 1 gives back unused; rank 2 sends its 100 messages.
TEST(VerbsTransport, AnIdlePeerGivesBackCreditsOverItsShare) {
  constexpr int kMessages = 100;
  RankOptions options;
  options.environment["IBCOLL_SRQ_DEPTH"] = "8";
  options.environment["IBCOLL_TIMEOUT"] = "60s";
  auto exits = run_ranks(
      3,
      [&](int, int) {
        runtime::VerbsEndpoint r;
        const int me = r.rank();
        int completed = 0;
        std::vector<Status> failures;
        auto count = [&](const Status& s, size_t) {
          ++completed;
          if (!s.ok()) failures.push_back(s);
        };
        uint64_t value = 0;
        std::vector<uint64_t> values(kMessages);
        if (me == 0) {
          r.channel().recv(1, 0, &value, sizeof(value), count);
          r.wait([&] { return completed == 1; }, "rank 1's message");
          r.bootstrap().barrier("rank 1 holds every credit");
          for (int m = 0; m < kMessages; ++m)
            r.channel().recv(2, m, &values[size_t(m)], sizeof(uint64_t), count);
          r.wait([&] { return completed == 1 + kMessages; }, "rank 2's messages");
          for (int m = 0; m < kMessages; ++m)
            RANK_CHECK(values[size_t(m)] == uint64_t(m) + 1000, "message " + std::to_string(m));
          RANK_CHECK(r.channel().counters().credit_recalls >= 1, "no credits were recalled");
        } else if (me == 1) {
          value = 7;
          r.channel().send(0, 0, &value, sizeof(value), count);
          r.wait([&] { return completed == 1; }, "sending to rank 0");
          r.bootstrap().barrier("rank 1 holds every credit");
          r.channel().recv(2, 0, &value, sizeof(value), count);  // idle until rank 2 is done
          r.wait([&] { return completed == 2; }, "rank 2's word that it is done");
        } else {
          r.bootstrap().barrier("rank 1 holds every credit");
          for (int m = 0; m < kMessages; ++m) {
            values[size_t(m)] = uint64_t(m) + 1000;
            r.channel().send(0, m, &values[size_t(m)], sizeof(uint64_t), count);
          }
          r.wait([&] { return completed == kMessages; }, "sending to rank 0");
          r.channel().send(1, 0, &value, sizeof(value), count);
          r.wait([&] { return completed == kMessages + 1; }, "telling rank 1");
        }
        RANK_CHECK(failures.empty(), failures.empty() ? "" : failures.front().to_string());
        r.bootstrap().barrier("end");
        return 0;
      },
      options);
  expect_all_ok(exits);
}

// Rank 0 talks to ranks 1 and 2 only: connections are made on demand, so it has exactly two.
TEST(VerbsTransport, ConnectsOnlyToPeersItTalksTo) {
  auto exits = run_ranks(8, [](int me, int) {
    runtime::VerbsEndpoint r;
    std::vector<Transfer> ops(4);
    char out = 'x';
    char in[2] = {};
    int expected = 0;
    if (me == 0) {
      for (int peer : {1, 2}) {
        r.channel().send(peer, 7, &out, 1, record(ops[expected++]));
        r.channel().recv(peer, 8, &in[peer - 1], 1, record(ops[expected++]));
      }
    } else if (me == 1 || me == 2) {
      r.channel().recv(0, 7, &in[0], 1, record(ops[expected++]));
      r.channel().send(0, 8, &out, 1, record(ops[expected++]));
    }
    r.wait(
        [&] {
          for (int i = 0; i < expected; ++i)
            if (!ops[i].done) return false;
          return true;
        },
        "ping");
    for (int i = 0; i < expected; ++i)
      RANK_CHECK(ops[i].status.ok(), ops[i].status.to_string());
    const uint64_t want = me == 0 ? 2 : (me <= 2 ? 1 : 0);
    const auto c = r.channel().counters();
    RANK_CHECK(c.connections == want, "connections: " + std::to_string(c.connections) +
                                          ", expected " + std::to_string(want));
    // RC QPs plus the one UD QP.
    RANK_CHECK(live_objects().qps == static_cast<int>(want) + 1,
               "live QPs: " + std::to_string(live_objects().qps));
    r.bootstrap().barrier("end");
    return 0;
  });
  expect_all_ok(exits);
}

// Resident memory of this process, in bytes.
size_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  size_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// A process keeps state only for the peers it deals with: a channel in a job of 2^20 ranks
// costs what one in a job of 2 does, and its timer (every millisecond) walks no rank it never
// met. Per-rank state used to take about 400 bytes for every rank of the job.
TEST(VerbsTransport, ItsStateDoesNotGrowWithTheJob) {
  auto exits = run_ranks(1, [](int, int) {
    const transport::verbs::Options options;
    { transport::verbs::VerbsChannel warm_up(0, 2, options); }
    const size_t before = resident_bytes();
    transport::verbs::VerbsChannel channel(0, 1 << 20, options);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(30);
    while (std::chrono::steady_clock::now() < until)
      channel.poll();  // ticks
    const size_t grown = resident_bytes() - std::min(before, resident_bytes());
    RANK_CHECK(grown < (size_t{16} << 20),
               "a channel of 2^20 ranks took " + std::to_string(grown >> 20) + " MiB more");
    return 0;
  });
  expect_all_ok(exits);
}

// A peer that does not poll for a while (busy elsewhere) does not answer the handshake: the
// request is resent on its timer, rank 0's wait ends at its deadline with a timeout, and the
// peer is not failed for it. Once the peer polls again the handshake completes and the message
// arrives; a slow peer used to be failed for good at the deadline.
TEST(VerbsTransport, ASlowPeerIsWaitedForNotFailedAtTheHandshake) {
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "2s";
  options.environment["IBCOLL_HANDSHAKE_RETRY"] = "100ms";
  auto exits = run_ranks(
      2,
      [](int me, int) {
        runtime::VerbsEndpoint r;
        char byte = 1;
        Transfer t;
        if (me == 1) {
          // Busy, past rank 0's deadline, then back.
          std::this_thread::sleep_for(std::chrono::seconds(4));
          r.channel().recv(0, 0, &byte, 1, record(t));
        } else {
          byte = 7;
          r.channel().send(1, 0, &byte, 1, record(t));
          try {
            r.wait([&] { return t.done; }, "send to a slow peer");
            RANK_CHECK(false, "the send completed before the peer polled");
          } catch (const Error& e) {
            RANK_CHECK(e.status().code() == Code::timeout, e.what());
          }
          RANK_CHECK(r.channel().counters().handshake_retries >= 5,
                     "retries: " + std::to_string(r.channel().counters().handshake_retries));
          RANK_CHECK(!r.channel().peer_failure(1), r.channel().peer_failure(1)->to_string());
        }
        const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(20);
        while (!t.done && std::chrono::steady_clock::now() < end)
          r.channel().poll();
        RANK_CHECK(t.done && t.status.ok(), t.done ? t.status.to_string() : "never delivered");
        if (me == 1) RANK_CHECK(byte == 7, "the message after the wait");
        return 0;
      },
      options);
  expect_all_ok(exits);
}

// `call` must throw Error with `code`, its message holding each of `parts`; `succeeded` says
// what it means if it does not throw.
void expect_error(const std::function<void()>& call, Code code,
                  std::initializer_list<const char*> parts, const std::string& succeeded) {
  try {
    call();
  } catch (const Error& e) {
    const std::string m = e.what();
    RANK_CHECK(e.status().code() == code, m);
    for (const char* part : parts)
      RANK_CHECK(m.find(part) != std::string::npos, m);
    return;
  }
  RANK_CHECK(false, succeeded);
}

// Soft-RoCE has no XRC: auto falls back to RC on one SRQ and says so; on is a clear error
// naming the device and errno (with IBCOLL_CM=rdmacm, naming that), and leaves nothing behind;
// a peer that says it uses XRC is refused by an RC channel. The job's XRC domain file sits in a
// private directory (made 0700) and is gone once the attempt is over.
TEST(VerbsTransport, XrcAutoFallsBackAndOnFails) {
  RankOptions options;
  options.environment["IBCOLL_LOG"] = "info";
  options.environment["IBCOLL_XRC_DIR"] = "/tmp/ibcoll-xrc-test-" + std::to_string(getpid());
  auto exits = run_ranks(
      1,
      [](int, int) {
        const std::string dir = std::getenv("IBCOLL_XRC_DIR");
        const std::string log = log_of([] { runtime::VerbsEndpoint r; });
        RANK_CHECK(log.find("XRC unavailable (ibv_open_xrcd on rxe0") != std::string::npos &&
                       log.find("using per-peer RC QPs on one shared SRQ") != std::string::npos,
                   "the fallback was not logged: " + log);
        struct stat info {};
        RANK_CHECK(lstat(dir.c_str(), &info) == 0 && S_ISDIR(info.st_mode) &&
                       (info.st_mode & 0777) == 0700,
                   "the XRC directory is not a private directory");
        RANK_CHECK(rmdir(dir.c_str()) == 0, "the XRC domain file was left behind in " + dir);
        RANK_CHECK(live_objects().qps == 0 && live_objects().contexts == 0, "leak after close");
        transport::verbs::Options xrc_on;
        xrc_on.xrc = transport::verbs::XrcMode::on;
        xrc_on.xrc_domain_file = dir + "/xrcd-on";
        expect_error([&] { transport::verbs::VerbsChannel channel(0, 1, xrc_on); },
                     Code::not_supported, {"IBCOLL_XRC=on", "rxe0", "errno 95"},
                     "IBCOLL_XRC=on succeeded on a device without XRC");
        rmdir(dir.c_str());
        {
          // A job whose nodes disagree (XRC on some only) is refused at the address exchange,
          // naming the rank: RC QPs and XRC INIs cannot be connected to each other.
          transport::verbs::VerbsChannel rc(0, 2, transport::verbs::Options{});
          auto other = rc.local_address();
          other.xrc = 1;
          expect_error(
              [&] {
                rc.set_peer_addresses({rc.local_address(), other});
              },
              Code::mismatch, {"rank 1 connects through XRC"},
              "an XRC peer was accepted by an RC channel");
        }
        // rdma_cm makes RC connections only: XRC=on with it is refused before any domain.
        xrc_on.connect = transport::verbs::ConnectMode::rdmacm;
        expect_error([&] { transport::verbs::VerbsChannel channel(0, 1, xrc_on); },
                     Code::not_supported, {"IBCOLL_CM=rdmacm"},
                     "IBCOLL_XRC=on with IBCOLL_CM=rdmacm succeeded");
        RANK_CHECK(access(dir.c_str(), F_OK) != 0, "rdma_cm with XRC=on made the XRC directory");
        const auto& live = live_objects();
        RANK_CHECK(live.contexts == 0 && live.pds == 0 && live.cqs == 0 && live.srqs == 0 &&
                       live.xrcds == 0,
                   "IBCOLL_XRC=on left verbs objects behind");
        return 0;
      },
      options);
  expect_all_ok(exits);
}

// The XRC domain file cannot be opened (a directory sits where it goes, or a symbolic link, which
// is never followed: what it points to is not created), or its directory is open to others:
// auto goes on with RC and logs why, where it used to abort the transport's set-up; on is an
// error naming the file or the directory.
TEST(VerbsTransport, XrcFileTroubleFallsBackInAutoAndFailsInOn) {
  auto exits = run_ranks(1, [](int, int) {
    const std::string dir = "/tmp/ibcoll-xrc-trouble-" + std::to_string(getpid());
    RANK_CHECK(mkdir(dir.c_str(), 0700) == 0 && mkdir((dir + "/blocked").c_str(), 0700) == 0,
               "mkdir");
    const std::string open_to_all = dir + "/open";
    RANK_CHECK(mkdir(open_to_all.c_str(), 0777) == 0 && chmod(open_to_all.c_str(), 0777) == 0,
               "mkdir");
    const std::string link = dir + "/link", target = dir + "/target";
    RANK_CHECK(symlink(target.c_str(), link.c_str()) == 0, "symlink");
    for (const std::string& file : {dir + "/blocked", link, open_to_all + "/xrcd"}) {
      transport::verbs::Options options;
      options.xrc_domain_file = file;
      const std::string log = log_of([&] {
        log::set_level(log::Level::info);
        transport::verbs::VerbsChannel channel(0, 1, options);
      });
      RANK_CHECK(log.find("XRC unavailable") != std::string::npos, file + ": " + log);
      options.xrc = transport::verbs::XrcMode::on;
      try {
        transport::verbs::VerbsChannel channel(0, 1, options);
        RANK_CHECK(false, "IBCOLL_XRC=on went on with " + file);
      } catch (const Error& e) {
        const std::string named = file.find(open_to_all) == 0 ? open_to_all : file;
        RANK_CHECK(std::string(e.what()).find(named) != std::string::npos, e.what());
      }
      RANK_CHECK(access(target.c_str(), F_OK) != 0, "the XRC domain file followed a link");
    }
    unlink(link.c_str());
    rmdir((dir + "/blocked").c_str());
    rmdir(open_to_all.c_str());
    rmdir(dir.c_str());
    return 0;
  });
  expect_all_ok(exits);
}

// Registrations grant no more than their use needs: through a pair of RC QPs joined in this
// process, an RDMA write into a buffer registered as a rendezvous receive's target lands, and
// one into a buffer registered to be sent from (the rendezvous sender's, the send slots') fails
// with a remote access error, where every registration used to allow remote writes.
TEST(VerbsTransport, RegistrationsGrantPeersNoMoreThanTheyNeed) {
  using namespace transport::verbs;
  auto exits = run_ranks(1, [](int, int) {
    Device device("", -1);
    ProtectionDomain pd = allocate_pd(device.context());
    CompletionQueue cq(device.context(), 64, false);
    SharedReceiveQueue srq(device.context(), pd.get(), 16, 256, nullptr, nullptr);
    RcQueuePair writer(pd.get(), cq.get(), srq.get(), 16, device);
    RcQueuePair target(pd.get(), cq.get(), srq.get(), 16, device);
    writer.connect(device.address(), target.qp_num(), target.psn());
    target.connect(device.address(), writer.qp_num(), writer.psn());
    RegistrationCache registrations(pd.get(), CacheMode::off, 0);
    std::vector<std::byte> source(4096, std::byte{7}), landing(4096), sent_from(4096);
    auto* from = registrations.acquire(source.data(), source.size(), Access::device_reads);
    auto* open = registrations.acquire(landing.data(), landing.size(), Access::peer_writes);
    auto* closed = registrations.acquire(sent_from.data(), sent_from.size(), Access::device_reads);
    auto write_into = [&](std::vector<std::byte>& into, RegistrationCache::Entry* entry) {
      ibv_sge sge{reinterpret_cast<uint64_t>(source.data()), 4096, from->mr->lkey};
      ibv_send_wr wr{};
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.opcode = IBV_WR_RDMA_WRITE;
      wr.send_flags = IBV_SEND_SIGNALED;
      wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(into.data());
      wr.wr.rdma.rkey = entry->mr->rkey;
      ibv_send_wr* bad = nullptr;
      RANK_CHECK(ibv_post_send(writer.get(), &wr, &bad) == 0, "ibv_post_send");
      ibv_wc wc{};
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (cq.poll(&wc, 1) == 0)
        RANK_CHECK(std::chrono::steady_clock::now() < end, "no completion");
      return wc.status;
    };
    RANK_CHECK(write_into(landing, open) == IBV_WC_SUCCESS && landing[0] == std::byte{7},
               "a write into a rendezvous target did not land");
    const ibv_wc_status refused = write_into(sent_from, closed);
    RANK_CHECK(
        refused == IBV_WC_REM_ACCESS_ERR,
        std::string("a write into memory registered to send from: ") + ibv_wc_status_str(refused));
    RANK_CHECK(sent_from[0] == std::byte{0}, "bytes landed in memory registered to send from");
    for (auto* entry : {from, open, closed})
      registrations.release(entry);
    return 0;
  });
  expect_all_ok(exits);
  // The channel itself: with its send slots, receive queue and handshake buffers registered
  // and messages flowing, no registration of the process is peer-writable; a rendezvous
  // receive's buffer is while its transfer runs; the sender's never is. Once the buffer has
  // landed it is not with IBCOLL_MR_CACHE=0; the registration cache (on by default) keeps it,
  // the one registration left open, until its memory is unmapped.
  for (const bool cached : {false, true}) {
    SCOPED_TRACE(cached ? "registration cache on" : "IBCOLL_MR_CACHE=0");
    RankOptions options;
    options.environment["IBCOLL_MR_CACHE"] = cached ? "1" : "0";
    expect_all_ok(run_ranks(
        2,
        [cached](int me, int) {
          runtime::VerbsEndpoint r;
          RANK_CHECK(r.channel().registrations_cached() == cached, "the cache is not as expected");
          const int peer = 1 - me;
          std::vector<std::byte> small(100, std::byte{1}), big(1 << 20, std::byte{2});
          Transfer out, in;
          r.channel().send(peer, 1, small.data(), small.size(), record(out));
          r.channel().recv(peer, 1, small.data(), small.size(), record(in));
          r.wait([&] { return out.done && in.done; }, "eager messages");
          RANK_CHECK(live_objects().peer_writable_mrs == 0,
                     std::to_string(live_objects().peer_writable_mrs) +
                         " peer-writable registrations with no rendezvous running");
          Transfer big_transfer;
          int most_open = 0;
          if (me == 1) {
            r.channel().recv(peer, 2, big.data(), big.size(), record(big_transfer));
          } else {
            r.channel().send(peer, 2, big.data(), big.size(), record(big_transfer));
          }
          r.wait(
              [&] {
                most_open = std::max<int>(most_open, live_objects().peer_writable_mrs);
                return big_transfer.done;
              },
              "the rendezvous");
          RANK_CHECK(big_transfer.status.ok(), big_transfer.status.to_string());
          RANK_CHECK(
              most_open == (me == 1 ? 1 : 0),
              std::to_string(most_open) + " peer-writable registrations during the transfer");
          const int left_open = me == 1 && cached ? 1 : 0;
          RANK_CHECK(live_objects().peer_writable_mrs == left_open,
                     std::to_string(live_objects().peer_writable_mrs) +
                         " peer-writable registrations once the transfer ended");
          r.bootstrap().barrier("end");
          return 0;
        },
        options));
  }
}

// A peer killed mid-transfer: every survivor's operations with it fail with an error that names
// it, well within the deadline, the survivors go on talking to each other, and each destroys its
// connection to the dead one once what it had posted there has flushed back.
TEST(VerbsTransport, KilledPeerFailsItsOperationsOnly) {
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "30s";
  options.environment["IBCOLL_KEEPALIVE"] = "300ms";
  auto exits = run_ranks(
      4,
      [](int me, int n) {
        runtime::VerbsEndpoint r;
        constexpr int kVictim = 3;
        constexpr size_t kBig = 4 << 20;
        std::vector<Transfer> to_victim(1), from_victim(1);
        std::vector<std::byte> big(kBig, std::byte{1});
        if (me == kVictim) {
          // Hear from every survivor (so all are connected), start sending, then die.
          std::vector<Transfer> pokes(kVictim);
          for (int peer = 0; peer < kVictim; ++peer) {
            pokes[peer].buffer.resize(1);
            r.channel().recv(peer, 1, pokes[peer].buffer.data(), 1, record(pokes[peer]));
            r.channel().send(peer, 2, big.data(), big.size(), [](const Status&, size_t) {});
          }
          r.wait([&] { return pokes[0].done && pokes[1].done && pokes[2].done; }, "pokes");
          raise(SIGKILL);
        }
        std::byte one{42};
        Transfer poke;
        r.channel().send(kVictim, 1, &one, 1, record(poke));
        from_victim[0].buffer.resize(kBig);
        r.channel().recv(kVictim, 3, from_victim[0].buffer.data(), kBig, record(from_victim[0]));
        r.channel().send(kVictim, 4, big.data(), big.size(), record(to_victim[0]));
        r.wait([&] { return from_victim[0].done && to_victim[0].done; },
               "operations with the victim");
        for (Transfer* t : {&from_victim[0], &to_victim[0]}) {
          RANK_CHECK(t->status.code() == Code::peer_failed, t->status.to_string());
          RANK_CHECK(t->status.message().find("peer 3") != std::string::npos, t->status.message());
        }
        // The survivors still reach each other.
        std::vector<Transfer> sends(n), recvs(n);
        for (int peer = 0; peer < kVictim; ++peer) {
          if (peer == me) continue;
          recvs[peer].buffer.resize(100000);
          sends[peer].buffer.assign(100000, std::byte(me));
          r.channel().recv(peer, 5, recvs[peer].buffer.data(), 100000, record(recvs[peer]));
          r.channel().send(peer, 5, sends[peer].buffer.data(), 100000, record(sends[peer]));
        }
        r.wait(
            [&] {
              for (int peer = 0; peer < kVictim; ++peer) {
                if (peer != me && (!sends[peer].done || !recvs[peer].done)) return false;
              }
              return true;
            },
            "survivors' exchange");
        for (int peer = 0; peer < kVictim; ++peer) {
          if (peer == me) continue;
          RANK_CHECK(sends[peer].status.ok() && recvs[peer].status.ok(),
                     sends[peer].status.to_string() + " / " + recvs[peer].status.to_string());
          RANK_CHECK(recvs[peer].buffer[99999] == std::byte(peer), "survivor payload");
        }
        // The dead peer's connection goes once what was posted on it has flushed back: the QPs
        // left are the two survivors' and the UD one.
        r.wait([&] { return r.channel().counters().released_connections == 1; },
               "the dead peer's connection to go");
        RANK_CHECK(live_objects().qps == 3, "live QPs: " + std::to_string(live_objects().qps));
        return 0;
      },
      options);
  EXPECT_EQ(exits[3].signal, SIGKILL) << describe(exits);
  for (int rank = 0; rank < 3; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << describe(exits);
}

// A peer another rank saw die (its word reached this one, RoutedChannel::peer_gone_elsewhere)
// is given up at once: the operations waiting on it (a receive, a rendezvous send it never
// answers) fail with that word and its connection goes, where they used to wait for this rank's
// own keepalives to fail it (8 to 10 s across the cluster's guests). The keepalive here is a
// minute, past the wait's deadline: only the word can end them. The peer lives on, silent.
// What rank 0 sent before the error was unsignaled and done, so nothing flushed back: the
// connection (and the sends' slots) stayed held for good until a signaled write was posted
// behind them.
TEST(VerbsTransport, APeerGoneByAnothersWordIsGivenUpAtOnce) {
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "20s";
  options.environment["IBCOLL_KEEPALIVE"] = "60s";
  auto exits = run_ranks(
      2,
      [](int me, int) {
        runtime::VerbsEndpoint r;
        std::byte one{42};
        Transfer poke;
        if (me == 1) {
          r.channel().send(0, 1, &one, 1, record(poke));
          r.wait([&] { return poke.done; }, "the poke");
          r.bootstrap().barrier("given up");
          return 0;
        }
        poke.buffer.resize(1);
        r.channel().recv(1, 1, poke.buffer.data(), 1, record(poke));
        r.wait([&] { return poke.done; }, "the poke");
        constexpr size_t kBig = 4 << 20;  // a rendezvous: it waits for the receiver's answer
        std::vector<std::byte> big(kBig, std::byte{1});
        Transfer from_peer, to_peer;
        from_peer.buffer.resize(16);
        r.channel().recv(1, 2, from_peer.buffer.data(), 16, record(from_peer));
        r.channel().send(1, 3, big.data(), big.size(), record(to_peer));
        r.channel().peer_gone_elsewhere(
            1, Status(Code::peer_failed, "rank 1 is gone (rank 7 saw it fail)"));
        r.wait([&] { return from_peer.done && to_peer.done; }, "operations with the peer");
        for (Transfer* t : {&from_peer, &to_peer}) {
          RANK_CHECK(t->status.code() == Code::peer_failed, t->status.to_string());
          RANK_CHECK(t->status.message().find("rank 7 saw it fail") != std::string::npos,
                     t->status.message());
        }
        RANK_CHECK(r.channel().peer_failure(1) != nullptr, "peer 1 is not held failed");
        r.wait([&] { return r.channel().counters().released_connections == 1; },
               "the given-up peer's connection to go");
        r.bootstrap().barrier("given up");
        return 0;
      },
      options);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_TRUE(exits[rank].ok()) << describe(exits);
}

// A rendezvous offer that came before its sender died: a receive posted for it once the sender
// is known dead fails at once, naming it. It used to answer the offer (to nobody: the peer's
// operations had all ended) and wait out IBCOLL_TIMEOUT for data that would never come.
TEST(VerbsTransport, AReceiveForADeadSendersOfferFails) {
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "20s";
  options.environment["IBCOLL_KEEPALIVE"] = "300ms";
  auto exits = run_ranks(
      2,
      [](int me, int) {
        runtime::VerbsEndpoint r;
        std::vector<std::byte> message(4 << 20, std::byte{3});
        std::byte go{1};
        if (me == 1) {
          Transfer offered, told;
          r.channel().send(0, 7, message.data(), message.size(), record(offered));
          r.channel().recv(0, 9, &go, 1, record(told));
          r.wait([&] { return told.done; }, "word that the offer is there");
          raise(SIGKILL);
        }
        // A receive of something it never sends keeps it probed until it is found gone.
        Transfer watch, tell;
        char nothing = 0;
        r.channel().recv(1, 8, &nothing, 1, record(watch));
        r.wait([&] { return r.channel().counters().early_arrivals == 1; }, "the offer");
        r.channel().send(1, 9, &go, 1, record(tell));
        r.wait([&] { return watch.done; }, "the sender's death");
        RANK_CHECK(watch.status.code() == Code::peer_failed, watch.status.to_string());
        Transfer late;
        r.channel().recv(1, 7, message.data(), message.size(), record(late));
        r.wait([&] { return late.done; }, "the receive of the dead sender's offer");
        RANK_CHECK(late.status.code() == Code::peer_failed, late.status.to_string());
        return 0;
      },
      options);
  EXPECT_EQ(exits[1].signal, SIGKILL) << describe(exits);
  EXPECT_TRUE(exits[0].ok()) << describe(exits);
}

// A rank that computes without polling for three times the liveness limit (4 keepalives),
// while six peers wait on it with a receive each, is not failed: the keepalives are
// acknowledged by its port and take none of its receive buffers (16 here, which six senders of
// probes every 200 ms empty in under half a second when probes are messages: the next probe then
// meets RNR retries without end, no acknowledgement, and the peer is failed as gone). The
// probes did go out, and it is heard as alive by everyone once it sends.
TEST(VerbsTransport, ARankThatComputesIsNotFailedByThePeersWaitingOnIt) {
  RankOptions options;
  options.environment = {{"IBCOLL_TIMEOUT", "60s"},
                         {"IBCOLL_KEEPALIVE", "200ms"},
                         {"IBCOLL_SRQ_DEPTH", "16"},
                         {"IBCOLL_CREDITS", "2"}};
  expect_all_ok(run_ranks(
      7,
      [](int me, int n) {
        runtime::VerbsEndpoint r;
        constexpr int kBusy = 0;
        exchange_all_to_all(r, r.channel(), {8});  // every pair connected
        r.bootstrap().barrier("connected");
        if (me == kBusy) {
          std::this_thread::sleep_for(std::chrono::milliseconds(3000));  // 3 x 800 ms, no poll
          std::vector<Transfer> sends(n);
          std::byte one{7};
          for (int peer = 1; peer < n; ++peer)
            r.channel().send(peer, 9, &one, 1, record(sends[peer]));
          r.wait(
              [&] {
                return std::all_of(sends.begin() + 1, sends.end(), [](auto& t) { return t.done; });
              },
              "sends after computing");
          for (int peer = 1; peer < n; ++peer)
            RANK_CHECK(sends[peer].status.ok(), sends[peer].status.to_string());
        } else {
          Transfer in;
          in.buffer.resize(1);
          r.channel().recv(kBusy, 9, in.buffer.data(), 1, record(in));
          r.wait([&] { return in.done; }, "the computing rank's message");
          RANK_CHECK(in.status.ok() && in.buffer[0] == std::byte{7},
                     "the computing rank was failed: " + in.status.to_string());
          const auto c = r.channel().counters();
          RANK_CHECK(c.keepalives_sent >= 3, "the computing rank was never probed (" +
                                                 std::to_string(c.keepalives_sent) + ")");
        }
        RANK_CHECK(r.channel().counters().failed_peers == 0, "a live peer was failed");
        r.bootstrap().barrier("end");
        return 0;
      },
      options));
}

// A send's completion, and the RDMA writes still posted when it came: none may be, since the
// device reads the caller's buffer until they complete.
struct SendEnding : Transfer {
  uint64_t writes_posted = 0;
};
transport::Completion record_ending(SendEnding& t, transport::verbs::VerbsChannel& channel) {
  return [&t, &channel](const Status& s, size_t bytes) {
    record(t)(s, bytes);
    t.writes_posted = channel.counters().rdma_writes_in_flight;
  };
}

// A peer killed while a rendezvous's RDMA writes to it are in flight: the send fails, naming
// the peer, and only once none of its writes is posted any more (each completed or flushed
// back), so that the caller's buffer is no longer read by the device when the failure arrives.
TEST(VerbsTransport, ASendToAKilledPeerEndsAfterItsWritesDo) {
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "30s";
  options.environment["IBCOLL_KEEPALIVE"] = "300ms";
  constexpr size_t kBig = 64 << 20;
  constexpr size_t kChunk = transport::verbs::VerbsChannel::kWriteChunkBytes;
  auto exits = run_ranks(
      2,
      [](int me, int) {
        runtime::VerbsEndpoint r;
        if (me == 1) {
          std::vector<std::byte> into(kBig, std::byte{0});
          Transfer never;
          r.channel().recv(0, 1, into.data(), kBig, record(never));
          const volatile std::byte* third_chunk = into.data() + 2 * kChunk;
          r.wait([&] { return *third_chunk != std::byte{0}; }, "the third chunk");
          raise(SIGKILL);
        }
        std::vector<std::byte> data(kBig, std::byte{1});
        SendEnding sent;
        r.channel().send(1, 1, data.data(), kBig, record_ending(sent, r.channel()));
        r.wait([&] { return sent.done; }, "the send");
        RANK_CHECK(sent.status.code() == Code::peer_failed, sent.status.to_string());
        RANK_CHECK(sent.status.message().find("peer 1") != std::string::npos,
                   sent.status.message());
        RANK_CHECK(sent.writes_posted == 0, std::to_string(sent.writes_posted) +
                                                " RDMA writes still posted when the send failed");
        return 0;
      },
      options);
  EXPECT_EQ(exits[1].signal, SIGKILL) << describe(exits);
  EXPECT_TRUE(exits[0].ok()) << describe(exits);
}

// Bad device names, ports and GID indexes are clear errors that leave nothing created.
TEST(VerbsTransport, BadDeviceSettingsAreClearErrors) {
  auto exits = run_ranks(1, [](int, int) {
    struct Case {
      std::string device;
      int gid;
      std::string expect;
    };
    const Case cases[] = {{"nosuch0", -1, "no device named 'nosuch0' (found: rxe0)"},
                          {"rxe0:9", -1, "rxe0 has no port 9"},
                          {"rxe0:x", -1, "port 'x' is not a port number"},
                          {"rxe0", 4000, "IBCOLL_GID_INDEX: 4000 is past the GID table"},
                          {"rxe0", 5, "IBCOLL_GID_INDEX: entry 5 of rxe0 is empty"}};
    for (const Case& c : cases) {
      try {
        transport::verbs::Device device(c.device, c.gid);
        RANK_CHECK(false, "accepted device '" + c.device + "'");
      } catch (const Error& e) {
        RANK_CHECK(e.status().code() == Code::invalid_argument, e.what());
        RANK_CHECK(std::string(e.what()).find(c.expect) != std::string::npos,
                   std::string(e.what()) + " lacks: " + c.expect);
      }
      RANK_CHECK(live_objects().contexts == 0, "a device stayed open");
    }
    transport::verbs::Options options;
    options.srq_depth = 1;
    try {
      transport::verbs::VerbsChannel channel(0, 1, options);
      RANK_CHECK(false, "accepted an SRQ of depth 1");
    } catch (const Error& e) {
      RANK_CHECK(std::string(e.what()).find("IBCOLL_SRQ_DEPTH") != std::string::npos, e.what());
    }
    RANK_CHECK(live_objects().contexts == 0 && live_objects().pds == 0, "half-created channel");
    return 0;
  });
  expect_all_ok(exits);
}

// Bad arguments to send/recv throw, name the argument, and change nothing; a receive buffer
// smaller than the message completes with `truncated` on both paths.
TEST(VerbsTransport, BadMessageArgumentsAndTruncation) {
  auto exits = run_ranks(2, [](int me, int) {
    runtime::VerbsEndpoint r;
    char byte = 0;
    const auto ignore = [](const Status&, size_t) {};
    auto expect_invalid = [&](const std::function<void()>& call, const std::string& expect) {
      expect_error(call, Code::invalid_argument, {expect.c_str()}, "accepted: " + expect);
    };
    expect_invalid([&] { r.channel().send(2, 0, &byte, 1, ignore); }, "send: peer 2 is outside");
    expect_invalid([&] { r.channel().send(-1, 0, &byte, 1, ignore); }, "send: peer -1 is outside");
    expect_invalid([&] { r.channel().recv(me, 0, &byte, 1, ignore); }, "is this process");
    expect_invalid([&] { r.channel().send(1 - me, 0, nullptr, 5, ignore); }, "buffer is null");
    expect_invalid([&] { r.channel().recv(1 - me, 0, nullptr, 5, ignore); }, "buffer is null");
    expect_invalid([&] { r.channel().send(1 - me, 0, &byte, size_t{1} << 40, ignore); },
                   "exceeds the largest message");
    expect_invalid([&] { r.channel().send(1 - me, 0, &byte, 1, nullptr); }, "no completion");
    const auto before = r.channel().counters();
    RANK_CHECK(before.connections == 0 && before.messages_sent == 0,
               "a rejected call changed the channel");

    std::vector<std::byte> big(100000, std::byte{7}), small(10);
    Transfer eager_in, rendezvous_in, eager_out, rendezvous_out;
    const int peer = 1 - me;
    r.channel().recv(peer, 1, small.data(), 4, record(eager_in));
    r.channel().recv(peer, 2, small.data(), 10, record(rendezvous_in));
    r.channel().send(peer, 1, big.data(), 100, record(eager_out));
    r.channel().send(peer, 2, big.data(), big.size(), record(rendezvous_out));
    r.wait(
        [&] {
          return eager_in.done && rendezvous_in.done && eager_out.done && rendezvous_out.done;
        },
        "truncated transfers");
    RANK_CHECK(eager_in.status.code() == Code::truncated && eager_in.bytes == 4,
               eager_in.status.to_string());
    RANK_CHECK(rendezvous_in.status.code() == Code::truncated && rendezvous_in.bytes == 10,
               rendezvous_in.status.to_string());
    RANK_CHECK(eager_out.status.ok() && rendezvous_out.status.ok(), "sender side failed");
    RANK_CHECK(small[9] == std::byte{7}, "truncated payload not delivered");
    r.bootstrap().barrier("end");
    return 0;
  });
  expect_all_ok(exits);
}

// An eager message longer than one buffer (IBCOLL_EAGER_BUFFER) travels in parts and is put
// together on arrival: into a receive posted before it; into the unexpected queue, for a receive
// posted once it is whole; truncated into a short receive; and, for a receive cancelled after
// its first parts came, the rest is dropped without touching the buffer, and the next message
// from that peer still matches. Two credits make the sender wait between parts, so the cancel
// lands in the middle of the message.
TEST(VerbsTransport, EagerMessagesInParts) {
  constexpr size_t kBytes = 40000;  // five parts of 8 KiB
  RankOptions options;
  options.environment["IBCOLL_CREDITS"] = "2";
  auto exits = run_ranks(
      2,
      [&](int me, int) {
        runtime::VerbsEndpoint r;
        auto pattern = [](uint64_t tag) {
          std::vector<std::byte> v(kBytes);
          for (size_t i = 0; i < kBytes; ++i)
            v[i] = pattern_byte(0, 1, tag, i);
          return v;
        };
        if (me == 0) {
          std::vector<Transfer> sent(6);
          std::vector<std::vector<std::byte>> data;
          for (uint64_t tag = 1; tag <= 6; ++tag)
            data.push_back(pattern(tag));
          auto send = [&](uint64_t tag) {
            const size_t bytes = tag == 3 || tag == 6 ? 100 : kBytes;
            r.channel().send(1, tag, data[tag - 1].data(), bytes, record(sent[tag - 1]));
          };
          for (uint64_t tag = 1; tag <= 4; ++tag)
            send(tag);
          // Messages 5 and 6 only once the receive for 5 is posted.
          r.wait([&] { return sent[3].done; }, "sends 1 to 4");
          r.bootstrap().barrier("receive 5 posted");
          send(5);
          send(6);
          r.wait([&] { return sent[4].done && sent[5].done; }, "sends 5 and 6");
          for (const Transfer& t : sent)
            RANK_CHECK(t.status.ok(), t.status.to_string());
        } else {
          std::vector<std::byte> posted_first(kBytes), unexpected(kBytes), small(100),
              short_in(10000), cancelled(kBytes, std::byte{0xEE}), after(100);
          Transfer first, later, marker, truncated, dropped, next;
          r.channel().recv(0, 1, posted_first.data(), kBytes, record(first));
          r.channel().recv(0, 3, small.data(), small.size(), record(marker));
          r.wait([&] { return first.done && marker.done; }, "message 1 and the marker after 2");
          r.channel().recv(0, 2, unexpected.data(), kBytes, record(later));  // whole by now
          r.channel().recv(0, 4, short_in.data(), short_in.size(), record(truncated));
          r.wait([&] { return later.done && truncated.done; }, "messages 2 and 4");
          RANK_CHECK(first.status.ok() && first.bytes == kBytes && posted_first == pattern(1),
                     "posted first: " + first.status.to_string());
          RANK_CHECK(later.status.ok() && later.bytes == kBytes && unexpected == pattern(2),
                     "posted after: " + later.status.to_string());
          RANK_CHECK(
              truncated.status.code() == Code::truncated && truncated.bytes == short_in.size(),
              truncated.status.to_string());
          RANK_CHECK(std::equal(short_in.begin(), short_in.end(), pattern(4).begin()),
                     "truncated payload");

          const uint64_t before = r.channel().counters().messages_received;
          r.channel().recv(0, 5, cancelled.data(), kBytes, record(dropped));
          r.bootstrap().barrier("receive 5 posted");
          // At most two parts (the credits) have come when the receive is cancelled.
          r.wait([&] { return r.channel().counters().messages_received > before; },
                 "the first part of message 5");
          r.channel().cancel(5, 5);
          r.channel().recv(0, 6, after.data(), after.size(), record(next));
          r.wait([&] { return next.done; }, "the message after a cancelled one");
          RANK_CHECK(next.status.ok() && next.bytes == after.size() &&
                         std::equal(after.begin(), after.end(), pattern(6).begin()),
                     "after the cancelled receive: " + next.status.to_string());
          RANK_CHECK(!dropped.done, "a cancelled receive completed");
          RANK_CHECK(cancelled[0] == pattern(5)[0], "the first part did not land");
          RANK_CHECK(cancelled.back() == std::byte{0xEE},
                     "the last part reached a cancelled receive");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      options);
  expect_all_ok(exits);
}

// Messages that arrive before their receives are posted wait in memory the channel keeps: once
// warm, rounds of them (six of one part, two of three parts, all waiting before any receive is
// posted) make no heap allocation per message on the receiver, where each took a vector. The
// sender starts a round when the receiver asks, through the channel itself.
TEST(VerbsTransport, EarlyArrivalsTakeNoHeapAllocationOnceWarm) {
  if (!heap_allocations()) GTEST_SKIP() << "allocations are not counted under AddressSanitizer";
  constexpr int kWarmUp = 50, kRounds = 200, kPerRound = 8;
  constexpr size_t kSmall = 64, kInParts = 20000;  // three parts of 8 KiB
  constexpr uint64_t kMessagesPerRound = 6 + 2 * 3;
  auto size_of = [](int k) { return k % 4 == 3 ? kInParts : kSmall; };
  expect_all_ok(run_ranks(2, [&](int me, int) {
    runtime::VerbsEndpoint r;
    std::vector<std::vector<std::byte>> buffers(kPerRound);
    for (int k = 0; k < kPerRound; ++k)
      buffers[static_cast<size_t>(k)].resize(size_of(k));
    std::byte token{1};
    uint64_t counted = 0;
    for (int round = 0; round < kWarmUp + kRounds; ++round) {
      const uint64_t base = 1000 + static_cast<uint64_t>(round) * 16;
      const uint64_t before = *heap_allocations();
      Transfer go, ends[kPerRound];
      if (me == 0) {
        r.channel().recv(1, base, &token, 1, record(go));
        r.wait([&] { return go.done; }, "the receiver's go");
        for (int k = 0; k < kPerRound; ++k) {
          auto& data = buffers[static_cast<size_t>(k)];
          for (size_t i = 0; i < data.size(); i += 997)
            data[i] = pattern_byte(0, 1, base + 1 + k, i);
          r.channel().send(1, base + 1 + k, data.data(), data.size(), record(ends[k]));
        }
      } else {
        const uint64_t arrived = r.channel().counters().messages_received;
        r.channel().send(0, base, &token, 1, record(go));
        r.wait(
            [&] {
              return go.done &&
                     r.channel().counters().messages_received >= arrived + kMessagesPerRound;
            },
            "a round's messages, before any receive");
        for (int k = 0; k < kPerRound; ++k) {
          auto& data = buffers[static_cast<size_t>(k)];
          r.channel().recv(0, base + 1 + k, data.data(), data.size(), record(ends[k]));
        }
      }
      r.wait(
          [&] {
            return std::all_of(std::begin(ends), std::end(ends),
                               [](const Transfer& t) { return t.done; });
          },
          "a round's messages");
      for (int k = 0; k < kPerRound; ++k) {
        const auto& data = buffers[static_cast<size_t>(k)];
        RANK_CHECK(ends[k].status.ok() && ends[k].bytes == data.size(), ends[k].status.to_string());
        for (size_t i = 0; i < data.size(); i += 997)
          RANK_CHECK(data[i] == pattern_byte(0, 1, base + 1 + k, i), "a wrong byte");
      }
      if (round >= kWarmUp) counted += *heap_allocations() - before;
    }
    RANK_CHECK(me == 0 || counted <= kRounds / 10,
               std::to_string(counted) + " heap allocations in " + std::to_string(kRounds) +
                   " rounds of " + std::to_string(kPerRound) + " early arrivals");
    r.bootstrap().barrier("end");
    return 0;
  }));
}

// A rendezvous receive into memory that cannot be registered (here: PROT_NONE pages) fails
// with the registration error, and its sender learns of the refusal instead of waiting.
TEST(VerbsTransport, UnregistrableReceiveBufferFailsBothSides) {
  auto exits = run_ranks(2, [](int me, int) {
    runtime::VerbsEndpoint r;
    constexpr size_t kBytes = 1 << 20;
    Transfer t;
    std::vector<std::byte> data(kBytes, std::byte{3});
    void* unusable = nullptr;
    if (me == 0) {
      r.channel().send(1, 9, data.data(), kBytes, record(t));
    } else {
      unusable = mmap(nullptr, kBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      r.channel().recv(0, 9, unusable, kBytes, record(t));
    }
    r.wait([&] { return t.done; }, "refused rendezvous");
    if (me == 0) {
      RANK_CHECK(t.status.message().find("could not register its buffer") != std::string::npos,
                 t.status.to_string());
    } else {
      RANK_CHECK(t.status.message().find("ibv_reg_mr") != std::string::npos, t.status.to_string());
      munmap(unusable, kBytes);
    }
    // The connection stays usable.
    Transfer again;
    std::vector<std::byte> in(100);
    if (me == 0)
      r.channel().send(1, 10, data.data(), 100, record(again));
    else
      r.channel().recv(0, 10, in.data(), 100, record(again));
    r.wait([&] { return again.done; }, "message after the refusal");
    RANK_CHECK(again.status.ok(), again.status.to_string());
    r.bootstrap().barrier("end");
    return 0;
  });
  expect_all_ok(exits);
}

constexpr size_t kRendezvous = 1 << 20;  // above IBCOLL_EAGER_LIMIT: by RDMA write
constexpr auto kUntouched = std::byte{0xEE};

bool untouched(const std::vector<std::byte>& buffer) {
  return std::all_of(buffer.begin(), buffer.end(), [](std::byte b) { return b == kUntouched; });
}

// A rendezvous receive withdrawn after it answered (the sender has its address and key, but
// waits at a barrier without polling): its registration goes at once, so when the sender goes
// on, its RDMA write cannot land; the buffer stays untouched, and the send ends in an error,
// either the receiver's news or the write failing on the wire, once its write is no longer
// posted.
TEST(VerbsTransport, AnAnsweredReceiveWithdrawnTakesNoLateWrite) {
  expect_all_ok(run_ranks(2, [](int me, int) {
    runtime::VerbsEndpoint r;
    if (me == 0) {
      std::vector<std::byte> data(kRendezvous, std::byte{1});
      SendEnding sent;
      r.channel().send(1, 1, data.data(), kRendezvous, record_ending(sent, r.channel()));
      r.wait([&] { return r.channel().counters().rendezvous_sent == 1; }, "the request");
      r.bootstrap().barrier("withdrawn");
      r.wait([&] { return sent.done; }, "the send");
      RANK_CHECK(!sent.status.ok(), "a write into a withdrawn receive succeeded");
      RANK_CHECK(sent.writes_posted == 0, std::to_string(sent.writes_posted) +
                                              " RDMA writes still posted when the send ended");
    } else {
      std::vector<std::byte> into(kRendezvous, kUntouched);
      Transfer dropped;
      r.channel().recv(0, 1, into.data(), kRendezvous, record(dropped));
      const uint64_t before = r.channel().counters().messages_received;
      r.wait([&] { return r.channel().counters().messages_received > before; }, "the request");
      poll_for(r.channel(), std::chrono::milliseconds(100));  // the answer goes out
      r.channel().cancel(1, 1);
      r.bootstrap().barrier("withdrawn");
      poll_for(r.channel(), std::chrono::milliseconds(1500));
      RANK_CHECK(!dropped.done, "a withdrawn receive completed");
      RANK_CHECK(untouched(into), "an RDMA write landed in a withdrawn receive's buffer");
    }
    return 0;
  }));
}

// A rendezvous send withdrawn after its request went out: the receive posted later fails,
// saying the sender gave the message up, and nothing lands in its buffer.
TEST(VerbsTransport, ASendWithdrawnAfterItsRequestFailsItsReceive) {
  expect_all_ok(run_ranks(2, [](int me, int) {
    runtime::VerbsEndpoint r;
    exchange_all_to_all(r, r.channel(), {8});  // connected: the request goes out at once
    if (me == 0) {
      std::vector<std::byte> data(kRendezvous, std::byte{1});
      Transfer sent;
      r.channel().send(1, 1, data.data(), kRendezvous, record(sent));
      r.wait([&] { return r.channel().counters().rendezvous_sent == 1; }, "the request");
      r.channel().cancel(1, 1);
      std::fill(data.begin(), data.end(), std::byte{2});  // the caller's again
      r.bootstrap().barrier("withdrawn");
      poll_for(r.channel(), std::chrono::milliseconds(500));
      RANK_CHECK(!sent.done, "a withdrawn send completed");
    } else {
      std::vector<std::byte> into(kRendezvous, kUntouched);
      Transfer withdrawn;
      r.bootstrap().barrier("withdrawn");
      r.channel().recv(0, 1, into.data(), kRendezvous, record(withdrawn));
      r.wait([&] { return withdrawn.done; }, "the withdrawn message");
      RANK_CHECK(withdrawn.status.code() == Code::peer_failed &&
                     withdrawn.status.message().find("gave the message up") != std::string::npos,
                 withdrawn.status.to_string());
      RANK_CHECK(untouched(into), "bytes of a withdrawn message landed");
    }
    r.bootstrap().barrier("end");
    return 0;
  }));
}

// An eager message cut between its parts (two credits hold the sender after its first two):
// the receive that took the first parts fails, saying the sender gave it up, and the next
// message from that sender matches its own receive.
TEST(VerbsTransport, AnEagerSendCutBetweenItsPartsFailsItsReceive) {
  constexpr size_t kBytes = 40000;  // five parts of 8 KiB
  RankOptions options;
  options.environment["IBCOLL_CREDITS"] = "2";
  expect_all_ok(run_ranks(
      2,
      [&](int me, int) {
        runtime::VerbsEndpoint r;
        if (me == 0) {
          std::vector<std::byte> data(kBytes, std::byte{1});
          Transfer cut, next;
          r.channel().send(1, 1, data.data(), kBytes, record(cut));
          r.wait([&] { return r.channel().counters().credit_stalls > 0; }, "the first parts");
          r.channel().cancel(1, 1);
          r.channel().send(1, 2, data.data(), 100, record(next));
          r.wait([&] { return next.done; }, "the next message");
          RANK_CHECK(!cut.done && next.status.ok(), next.status.to_string());
        } else {
          std::vector<std::byte> into(kBytes, kUntouched), after(100);
          Transfer cut, next;
          r.channel().recv(0, 1, into.data(), kBytes, record(cut));
          r.channel().recv(0, 2, after.data(), after.size(), record(next));
          r.wait([&] { return cut.done && next.done; }, "both");
          RANK_CHECK(cut.status.code() == Code::peer_failed &&
                         cut.status.message().find("gave the message up") != std::string::npos,
                     cut.status.to_string());
          RANK_CHECK(next.status.ok() && after[0] == std::byte{1}, next.status.to_string());
          RANK_CHECK(into.back() == kUntouched, "the last part landed");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      options));
}

// A call given up (cancel) before its messages were all taken: those that came early (a
// message, one in parts, a rendezvous request) leave the receiver's queue with it, and those
// that come after it are dropped on arrival, so none waits for a receive that will never be
// posted; each rendezvous request is refused, so its send fails instead of waiting.
TEST(VerbsTransport, WhatComesForAWithdrawnReceiveIsDropped) {
  constexpr size_t kParts = 40000;  // five parts of 8 KiB
  expect_all_ok(run_ranks(2, [](int me, int) {
    runtime::VerbsEndpoint r;
    exchange_all_to_all(r, r.channel(), {8});  // connected: requests go out at once
    std::vector<std::byte> data(kRendezvous, std::byte{1});
    if (me == 0) {
      Transfer small, parts, request, later_small, later_request, marker;
      r.channel().send(1, 5, data.data(), 100, record(small));
      r.channel().send(1, 6, data.data(), kParts, record(parts));
      r.channel().send(1, 7, data.data(), kRendezvous, record(request));
      r.wait(
          [&] { return small.done && parts.done && r.channel().counters().rendezvous_sent == 1; },
          "the early messages");
      r.bootstrap().barrier("withdrawn");
      r.channel().send(1, 8, data.data(), 100, record(later_small));
      r.channel().send(1, 9, data.data(), kRendezvous, record(later_request));
      r.channel().send(1, 10, data.data(), 8, record(marker));
      r.wait([&] { return request.done && later_request.done && later_small.done && marker.done; },
             "the sends");
      for (const Transfer* refused : {&request, &later_request}) {
        RANK_CHECK(refused->status.code() == Code::peer_failed &&
                       refused->status.message().find("receiver gave") != std::string::npos,
                   refused->status.to_string());
      }
      RANK_CHECK(small.status.ok() && parts.status.ok() && later_small.status.ok(),
                 "an eager send failed");
    } else {
      r.wait([&] { return r.channel().counters().early_arrivals == 3; }, "three early arrivals");
      r.channel().cancel(5, 9);
      RANK_CHECK(r.channel().counters().early_arrivals == 0,
                 std::to_string(r.channel().counters().early_arrivals) +
                     " early arrivals of a withdrawn call left");
      r.bootstrap().barrier("withdrawn");
      std::vector<std::byte> marker(8);
      Transfer got;
      r.channel().recv(0, 10, marker.data(), marker.size(), record(got));
      r.wait([&] { return got.done; }, "the message after");
      poll_for(r.channel(), std::chrono::milliseconds(300));  // the refusal goes out
      RANK_CHECK(got.status.ok(), got.status.to_string());
      RANK_CHECK(r.channel().counters().early_arrivals == 0,
                 std::to_string(r.channel().counters().early_arrivals) +
                     " messages for a withdrawn call kept after it");
    }
    r.bootstrap().barrier("end");
    return 0;
  }));
}

}  // namespace
}  // namespace ibcoll::testing
