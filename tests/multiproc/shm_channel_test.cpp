// The shared-memory channel between real forked processes on this machine: messages of every
// size through the rings and by single copy (process_vm_readv), unexpected and truncated
// messages, single copy refused by the kernel (a seccomp filter, as container runtimes
// install), a peer that dies, and the segment's hygiene (0600, unlinked once everyone is
// attached).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "runtime/shm_endpoint.h"
#include "tests/support/exchange.h"
#include "transport/shm/fragment.h"

namespace ibcoll::testing {
namespace {

const std::vector<size_t> kSizes{0, 1, 7, 16360, 16361, 65537, (1 << 20) + 5, 16 << 20};

// Every message through the rings ("0"), or every one but the empty ones by single copy ("1"),
// not the window measured at start-up: a test about one path takes it whatever this machine
// measures.
RankOptions single_copy_from(const char* threshold) {
  RankOptions options;
  options.environment["IBCOLL_SHM_SINGLE_COPY"] = threshold;
  return options;
}

// From here on, process_vm_readv fails with EPERM in this process, as in a container whose
// seccomp profile forbids it. (Matches the syscall number of the native ABI only: enough here.)
void forbid_reading_other_processes() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    throw std::runtime_error(std::string("seccomp: ") + std::strerror(errno));
  }
}

TEST(ShmChannel, AllToAllEverySizeWithTwoThreeAndFourRanks) {
  for (const char* threshold : {"0", "1"}) {
    for (int ranks : {2, 3, 4}) {
      SCOPED_TRACE(std::string("IBCOLL_SHM_SINGLE_COPY=") + threshold);
      expect_all_ok(run_ranks(
          ranks,
          [](int, int) {
            runtime::ShmEndpoint r;
            exchange_all_to_all(r, r.channel(), kSizes);
            r.bootstrap().barrier("end");
            return 0;
          },
          single_copy_from(threshold)));
    }
  }
}

// Rank 1 may not read rank 0's memory: it refuses each rendezvous, and rank 0 copies those
// messages through the ring instead. Rank 0 still reads rank 1's directly. Every byte arrives.
TEST(ShmChannel, RefusedSingleCopyFallsBackToTheRing) {
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        runtime::ShmEndpoint r;
        if (me == 1) {
          forbid_reading_other_processes();
          std::byte probe{}, into{};
          iovec local{&into, 1}, remote{&probe, 1};
          RANK_CHECK(process_vm_readv(getpid(), &local, 1, &remote, 1, 0) < 0 && errno == EPERM,
                     "the seccomp filter did not take");
        }
        exchange_all_to_all(r, r.channel(), kSizes);
        exchange_all_to_all(r, r.channel(), kSizes);  // after the refusal: straight to the ring
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("1")));
}

// Only messages inside the window go by single copy: rank 1 may not read rank 0's memory, so
// the first message rank 0 sends it by single copy is refused, and rank 0 then knows. Messages
// below and above the window (4K-1M) leave it unknowing; one inside it does not.
TEST(ShmChannel, OnlyMessagesInsideTheWindowGoBySingleCopy) {
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        runtime::ShmEndpoint r;
        if (me == 1) forbid_reading_other_processes();
        r.bootstrap().barrier("forbidden");
        exchange_all_to_all(r, r.channel(), {2000, 1 << 20, 16 << 20});
        if (me == 0) {
          RANK_CHECK(r.channel().single_copy_possible(1), "a size outside 4K-1M was refused");
        }
        exchange_all_to_all(r, r.channel(), {(1 << 20) - 1});
        if (me == 0) {
          RANK_CHECK(!r.channel().single_copy_possible(1), "1M-1 did not go by single copy");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("4K-1M")));
}

// With IBCOLL_SHM_SINGLE_COPY unset, the node's first two ranks measure single copy against the
// rings at start-up, and every rank of the node runs with their verdict (one of the sizes
// measured, or rings only) and says where it came from. Where the kernel refuses single copy to
// either of the two (a seccomp filter on rank 0 or on rank 1), it is rings only on every rank;
// where nothing is forbidden the machine may still refuse it (a ptrace policy), and says so. A
// value that is set is taken as set.
TEST(ShmChannel, SingleCopyIsMeasuredAtStartAndAgreedAcrossTheNode) {
  for (int forbidden : {-1, 0, 1}) {
    SCOPED_TRACE("process_vm_readv forbidden on rank " + std::to_string(forbidden));
    expect_all_ok(run_ranks(3, [forbidden](int me, int) {
      if (me == forbidden) forbid_reading_other_processes();
      runtime::ShmEndpoint r;
      const std::string mine = r.channel().single_copy().text();
      const std::string origin = r.channel().single_copy_origin();
      const auto all = r.bootstrap().allgather("threshold", mine);
      RANK_CHECK(
          std::count(all.begin(), all.end(), all[0]) == 3,
          "the ranks run with different thresholds: " + all[0] + ", " + all[1] + ", " + all[2]);
      RANK_CHECK(origin.rfind("measured at start-up: ", 0) == 0, origin);
      const bool refused =
          origin.find("single copy does not work here: the kernel refused") != std::string::npos;
      if (forbidden >= 0) {
        RANK_CHECK(mine == "0" && refused, origin);
      } else {
        RANK_CHECK(
            refused ? mine == "0" : origin.find("rings / single copy: 8K ") != std::string::npos,
            origin);
      }
      exchange_all_to_all(r, r.channel(), {0, 100000, 1 << 20});
      r.bootstrap().barrier("end");
      return 0;
    }));
  }
  expect_all_ok(run_ranks(
      2,
      [](int, int) {
        runtime::ShmEndpoint r;
        RANK_CHECK(r.channel().single_copy().text() == "4K-1M" &&
                       r.channel().single_copy_origin() == "IBCOLL_SHM_SINGLE_COPY",
                   r.channel().single_copy_origin());
        return 0;
      },
      single_copy_from("4K-1M")));
}

// Messages sent long before their receive is posted wait in the unexpected queue intact, in
// order per tag; a buffer too small for its message completes with `truncated`.
TEST(ShmChannel, UnexpectedAndTruncatedMessages) {
  for (const char* threshold : {"0", "1"}) {
    SCOPED_TRACE(std::string("IBCOLL_SHM_SINGLE_COPY=") + threshold);
    expect_all_ok(run_ranks(
        2,
        [](int me, int) {
          runtime::ShmEndpoint r;
          std::vector<std::byte> big(3 << 20), small(100);
          if (me == 0) {
            Transfer a, b, c;
            for (size_t i = 0; i < big.size(); ++i)
              big[i] = pattern_byte(0, 1, 1, i);
            r.channel().send(1, 1, big.data(), big.size(), record(a));
            r.channel().send(1, 1, big.data(), 1000, record(b));
            r.channel().send(1, 2, big.data(), big.size(), record(c));
            r.wait([&] { return a.done && b.done && c.done; }, "sends");
            RANK_CHECK(a.status.ok() && b.status.ok() && c.status.ok(), "send failed");
          } else {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let them arrive first
            Transfer first, second, truncated;
            first.buffer.resize(big.size());
            second.buffer.resize(1000);
            r.channel().recv(0, 1, first.buffer.data(), first.buffer.size(), record(first));
            r.channel().recv(0, 1, second.buffer.data(), 1000, record(second));
            r.channel().recv(0, 2, small.data(), small.size(), record(truncated));
            r.wait([&] { return first.done && second.done && truncated.done; }, "receives");
            RANK_CHECK(first.status.ok() && first.bytes == big.size(), first.status.to_string());
            RANK_CHECK(second.status.ok() && second.bytes == 1000, second.status.to_string());
            for (size_t i = 0; i < big.size(); ++i) {
              RANK_CHECK(first.buffer[i] == pattern_byte(0, 1, 1, i), "first message byte");
            }
            RANK_CHECK(second.buffer[999] == pattern_byte(0, 1, 1, 999), "second message byte");
            RANK_CHECK(truncated.status.code() == Code::truncated && truncated.bytes == 100,
                       truncated.status.to_string());
            RANK_CHECK(small[99] == pattern_byte(0, 1, 1, 99), "truncated payload");
          }
          r.bootstrap().barrier("end");
          return 0;
        },
        single_copy_from(threshold)));
  }
}

// A poll visits only the peers a rank sends to or hears from. 16 ranks poll for 100 ms while
// rank 2 sends rank 3 one message: the segment then holds the bitmaps of senders, that pair's
// ring (and its reverse's counters) and little else. Polling every ring kept a page of each of
// the 16 x 15 rings (960 KiB); the message still arrives, found through rank 3's bitmap.
TEST(ShmChannel, IdlePollsTouchOnlyTheRingsInUse) {
  constexpr int kRanks = 16;
  expect_all_ok(run_ranks(
      kRanks,
      [](int me, int) {
        runtime::ShmEndpoint r;
        Transfer sent, received;
        char out = 'x', in = 0;
        if (me == 2) r.channel().send(3, 5, &out, 1, record(sent));
        if (me == 3) r.channel().recv(2, 5, &in, 1, record(received));
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
        while (std::chrono::steady_clock::now() < until)
          r.channel().poll();
        if (me == 3) {
          r.wait([&] { return received.done; }, "rank 2's message");
          RANK_CHECK(received.status.ok() && in == 'x', received.status.to_string());
        }
        if (me == 2) r.wait([&] { return sent.done; }, "the send");
        r.bootstrap().barrier("polled");
        const size_t bound = transport::shm::ShmChannel::polled_bytes(kRanks) +
                             2 * transport::shm::Ring::kBytes + (64 << 10);
        const size_t resident = r.channel().segment().resident_bytes();
        RANK_CHECK(resident <= bound, "the segment holds " + std::to_string(resident >> 10) +
                                          " KiB, more than " + std::to_string(bound >> 10));
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("0")));
}

// A rank killed while the others wait on it: their operations with it fail naming it, and
// they go on exchanging with each other.
TEST(ShmChannel, KilledPeerFailsItsOperationsOnly) {
  for (const char* threshold : {"0", "1"}) {
    SCOPED_TRACE(std::string("IBCOLL_SHM_SINGLE_COPY=") + threshold);
    RankOptions options = single_copy_from(threshold);
    options.environment["IBCOLL_TIMEOUT"] = "20s";
    auto exits = run_ranks(
        3,
        [](int me, int) {
          runtime::ShmEndpoint r;
          if (me == 2) {
            r.bootstrap().barrier("ready");
            raise(SIGKILL);
          }
          r.bootstrap().barrier("ready");
          Transfer from_dead, to_dead;
          std::vector<std::byte> big(8 << 20), in(8 << 20);
          r.channel().recv(2, 1, in.data(), in.size(), record(from_dead));
          // Fills the ring, or waits for an answer to its rendezvous.
          r.channel().send(2, 1, big.data(), big.size(), record(to_dead));
          r.wait([&] { return from_dead.done && to_dead.done; }, "operations with the dead peer");
          for (Transfer* t : {&from_dead, &to_dead}) {
            RANK_CHECK(t->status.code() == Code::peer_failed, t->status.to_string());
            RANK_CHECK(t->status.message().find("rank 2 (pid") != std::string::npos,
                       t->status.message());
          }
          Transfer out, back;
          char ping = 'p', pong = 0;
          r.channel().send(1 - me, 2, &ping, 1, record(out));
          r.channel().recv(1 - me, 2, &pong, 1, record(back));
          r.wait([&] { return out.done && back.done; }, "survivors");
          RANK_CHECK(back.status.ok() && pong == 'p', back.status.to_string());
          return 0;
        },
        options);
    EXPECT_EQ(exits[2].signal, SIGKILL) << describe(exits);
    EXPECT_TRUE(exits[0].ok() && exits[1].ok()) << describe(exits);
  }
}

// Three ranks fill the rings between them both ways (4 MiB through each, no single copy);
// rank 2 dies. Once ranks 0 and 1 have found it gone (a receive from it fails), the rings of
// their pairs with it go back to the kernel: the segment holds at least two rings' worth less.
TEST(ShmChannel, ADeadPeersRingsGoBackToTheKernel) {
  RankOptions options = single_copy_from("0");
  options.environment["IBCOLL_TIMEOUT"] = "20s";
  auto exits = run_ranks(
      3,
      [](int me, int) {
        runtime::ShmEndpoint r;
        std::vector<std::byte> out(4 << 20, std::byte{1});
        std::vector<std::vector<std::byte>> in(3, std::vector<std::byte>(out.size()));
        std::vector<Transfer> sent(3), received(3);
        for (int peer = 0; peer < 3; ++peer) {
          if (peer == me) continue;
          r.channel().send(peer, 1, out.data(), out.size(),
                           record(sent[static_cast<size_t>(peer)]));
          r.channel().recv(peer, 1, in[static_cast<size_t>(peer)].data(), out.size(),
                           record(received[static_cast<size_t>(peer)]));
        }
        r.wait(
            [&] {
              for (int peer = 0; peer < 3; ++peer)
                if (peer != me && !(sent[static_cast<size_t>(peer)].done &&
                                    received[static_cast<size_t>(peer)].done))
                  return false;
              return true;
            },
            "the exchange");
        r.bootstrap().barrier("filled");
        const size_t before = r.channel().segment().resident_bytes();
        r.bootstrap().barrier("measured");
        if (me == 2) raise(SIGKILL);
        Transfer from_dead;
        char nothing = 0;
        r.channel().recv(2, 2, &nothing, 1, record(from_dead));
        r.wait([&] { return from_dead.done; }, "a receive from the dead peer");
        RANK_CHECK(from_dead.status.code() == Code::peer_failed, from_dead.status.to_string());
        meet_without_ibcoll("rings-back", me, {0, 1});
        const size_t after = r.channel().segment().resident_bytes();
        RANK_CHECK(after + 2 * transport::shm::Ring::kBytes <= before,
                   "the segment holds " + std::to_string(after >> 10) + " KiB, was " +
                       std::to_string(before >> 10) + " KiB");
        return 0;
      },
      options);
  meeting_over("rings-back", {0, 1});
  EXPECT_EQ(exits[2].signal, SIGKILL) << describe(exits);
  EXPECT_TRUE(exits[0].ok() && exits[1].ok()) << describe(exits);
}

// A message that came before its sender died, and that can no longer be taken whole: the
// first part of a long one through the ring (its sender killed before it wrote the rest), or
// a single copy's offer (its memory went with its process). A receive posted for it once the
// sender is known dead fails at once, naming it; it used to wait out IBCOLL_TIMEOUT, parked
// for data or a copy nobody would ever bring.
TEST(ShmChannel, AReceiveForWhatADeadSenderLeftUnfinishedFails) {
  for (const char* single_copy : {"0", "1"}) {
    SCOPED_TRACE(single_copy);
    RankOptions options = single_copy_from(single_copy);
    options.environment["IBCOLL_TIMEOUT"] = "20s";
    auto exits = run_ranks(
        2,
        [](int me, int) {
          runtime::ShmEndpoint r;
          std::vector<std::byte> message(4 << 20, std::byte{3});
          if (me == 1) {
            // One write of the ring's worth (or the offer), then no more progress: it dies.
            r.channel().send(0, 7, message.data(), message.size(), [](const Status&, size_t) {});
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
            raise(SIGKILL);
          }
          // A receive of something it never sends keeps its process watched until it is gone.
          Transfer watch;
          char nothing = 0;
          r.channel().recv(1, 8, &nothing, 1, record(watch));
          r.wait([&] { return watch.done; }, "the sender's death");
          RANK_CHECK(watch.status.code() == Code::peer_failed, watch.status.to_string());
          Transfer late;
          r.channel().recv(1, 7, message.data(), message.size(), record(late));
          r.wait([&] { return late.done; }, "the receive of what the dead sender left");
          RANK_CHECK(late.status.code() == Code::peer_failed, late.status.to_string());
          return 0;
        },
        options);
    EXPECT_EQ(exits[1].signal, SIGKILL) << describe(exits);
    EXPECT_TRUE(exits[0].ok()) << describe(exits);
  }
}

constexpr size_t kLong = 4 << 20;  // many ring slots: a message copied through is long under way
constexpr auto kFill = std::byte{0xEE};

// Sends kLong bytes of ones to rank 1 (tag 1) and polls once: the ring fills, or a rendezvous
// is announced; the rest waits for the receiver.
void begin_long_send(runtime::ShmEndpoint& r, std::vector<std::byte>& message, Transfer& sent) {
  message.assign(kLong, std::byte{1});
  r.channel().send(1, 1, message.data(), kLong, record(sent));
  r.channel().poll();
}

// The same, then the send withdrawn and the buffer filled with twos (the caller's again), and
// rank 1 told at the barrier "cancelled".
void begin_and_withdraw_long_send(runtime::ShmEndpoint& r, std::vector<std::byte>& message,
                                  Transfer& sent) {
  begin_long_send(r, message, sent);
  r.channel().cancel(1, 1);
  std::fill(message.begin(), message.end(), std::byte{2});
  r.bootstrap().barrier("cancelled");
}

// The receive ended because its sender withdrew the message.
void expect_withdrawn(const Transfer& t) {
  RANK_CHECK(t.status.code() == Code::peer_failed &&
                 t.status.message().find("withdrew") != std::string::npos,
             t.status.to_string());
}

// A receive cancelled while its message is midway through the ring (the sender filled the
// ring and waits at a barrier, not polling): what arrives after the cancel lands nowhere (the
// buffer stays as it was then) and its completion never runs, while the sender's send completes
// and a later message from it arrives intact.
TEST(ShmChannel, AReceiveCancelledMidwayTakesNothingMore) {
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        runtime::ShmEndpoint r;
        std::vector<std::byte> message(kLong);
        for (size_t i = 0; i < kLong; ++i)
          message[i] = pattern_byte(0, 1, 1, i);
        if (me == 0) {
          Transfer sent, next;
          r.channel().send(1, 1, message.data(), kLong, record(sent));
          r.channel().send(1, 2, message.data(), 100, record(next));
          r.bootstrap().barrier("cancelled");
          r.wait([&] { return sent.done && next.done; }, "sends");
          RANK_CHECK(sent.status.ok() && next.status.ok(), sent.status.to_string());
        } else {
          Transfer dropped, next;
          std::vector<std::byte> into(kLong, kFill), after(100);
          r.channel().recv(0, 1, into.data(), kLong, record(dropped));
          r.wait([&] { return into[0] != kFill; }, "the first fragments");
          r.channel().cancel(1, 1);
          const std::vector<std::byte> at_cancel = into;
          RANK_CHECK(at_cancel[kLong - 1] == kFill, "the whole message came before the cancel");
          r.bootstrap().barrier("cancelled");
          r.channel().recv(0, 2, after.data(), after.size(), record(next));
          r.wait([&] { return next.done; }, "the message after");
          poll_for(r.channel(), std::chrono::milliseconds(100));
          RANK_CHECK(next.status.ok() && after[99] == message[99], next.status.to_string());
          RANK_CHECK(!dropped.done, "a cancelled receive completed");
          RANK_CHECK(into == at_cancel, "bytes landed in a cancelled receive's buffer");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("0")));
}

// A send cancelled with its message midway through the ring (the receiver had not drained it):
// the receiver's receive fails, saying the peer withdrew it, and nothing after the cut lands;
// the sender's completion never runs, and it may reuse the buffer at once.
TEST(ShmChannel, ASendCancelledMidwayFailsItsReceive) {
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        runtime::ShmEndpoint r;
        if (me == 0) {
          std::vector<std::byte> message;
          Transfer sent;
          begin_and_withdraw_long_send(r, message, sent);
          poll_for(r.channel(), std::chrono::milliseconds(300));
          RANK_CHECK(!sent.done, "a cancelled send completed");
        } else {
          std::vector<std::byte> into(kLong, kFill);
          Transfer withdrawn;
          r.bootstrap().barrier("cancelled");
          r.channel().recv(0, 1, into.data(), kLong, record(withdrawn));
          r.wait([&] { return withdrawn.done; }, "the withdrawn message");
          expect_withdrawn(withdrawn);
          RANK_CHECK(into[kLong - 1] == kFill, "bytes after the cut landed");
          RANK_CHECK(std::find(into.begin(), into.end(), std::byte{2}) == into.end(),
                     "bytes written after the cancel arrived");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("0")));
}

// A single-copy message withdrawn before its receiver read it: the receive posted afterwards
// fails instead of reading the sender's memory, and its buffer stays as it was.
TEST(ShmChannel, AWithdrawnRendezvousIsNotRead) {
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        runtime::ShmEndpoint r;
        if (me == 0) {
          std::vector<std::byte> message;
          Transfer sent;
          begin_and_withdraw_long_send(r, message, sent);
          RANK_CHECK(!sent.done, "a cancelled send completed");
        } else {
          r.bootstrap().barrier("cancelled");
          std::vector<std::byte> into(kLong, kFill);
          Transfer withdrawn;
          r.channel().recv(0, 1, into.data(), kLong, record(withdrawn));
          r.wait([&] { return withdrawn.done; }, "the withdrawn rendezvous");
          expect_withdrawn(withdrawn);
          RANK_CHECK(std::all_of(into.begin(), into.end(), [](std::byte b) { return b == kFill; }),
                     "the receiver read a withdrawn rendezvous");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("1")));
}

// The receiver may not read the sender (seccomp) and refused its rendezvous, so it awaits the
// message through the ring; the sender withdraws it before sending any: the receive fails.
TEST(ShmChannel, AWithdrawnRefusedRendezvousFailsItsReceive) {
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        runtime::ShmEndpoint r;
        if (me == 0) {
          std::vector<std::byte> message;
          Transfer sent;
          begin_long_send(r, message, sent);
          r.bootstrap().barrier("sent");
          r.bootstrap().barrier("refused");
          r.channel().cancel(1, 1);
          poll_for(r.channel(), std::chrono::milliseconds(300));
          RANK_CHECK(!sent.done, "a cancelled send completed");
        } else {
          forbid_reading_other_processes();
          r.bootstrap().barrier("sent");
          std::vector<std::byte> into(kLong, kFill);
          Transfer withdrawn;
          r.channel().recv(0, 1, into.data(), kLong, record(withdrawn));
          r.channel().poll();  // refuses: the kernel will not let it read
          r.bootstrap().barrier("refused");
          r.wait([&] { return withdrawn.done; }, "the withdrawn copy");
          expect_withdrawn(withdrawn);
          RANK_CHECK(into[0] == kFill, "bytes landed");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("1")));
}

// A call given up (cancel) before its messages were taken: those that came early (a short
// message, a long one still arriving through the ring) leave the receiver's queue with it,
// and those that come after it are dropped on arrival, so none waits for a receive that will
// never be posted. Through the rings, then by single copy, where each is a rendezvous and is
// declined, so that its send fails instead of waiting.
TEST(ShmChannel, WhatComesForAWithdrawnReceiveIsDropped) {
  for (const char* threshold : {"0", "1"}) {
    SCOPED_TRACE(std::string("IBCOLL_SHM_SINGLE_COPY=") + threshold);
    const bool by_single_copy = threshold == std::string("1");
    expect_all_ok(run_ranks(
        2,
        [&](int me, int) {
          runtime::ShmEndpoint r;
          std::vector<std::byte> data(kLong, std::byte{1});
          if (me == 0) {
            Transfer small, long_one, later_small, later_long, marker;
            r.channel().send(1, 5, data.data(), 100, record(small));
            r.channel().send(1, 6, data.data(), kLong, record(long_one));
            r.bootstrap().barrier("withdrawn");
            r.channel().send(1, 8, data.data(), 100, record(later_small));
            r.channel().send(1, 9, data.data(), kLong, record(later_long));
            r.channel().send(1, 10, data.data(), 8, record(marker));
            r.wait(
                [&] {
                  return small.done && long_one.done && later_small.done && later_long.done &&
                         marker.done;
                },
                "the sends");
            for (const Transfer* sent : {&small, &long_one, &later_small, &later_long}) {
              if (by_single_copy) {
                expect_withdrawn(*sent);
              } else {
                RANK_CHECK(sent->status.ok(), sent->status.to_string());
              }
            }
          } else {
            r.wait([&] { return r.channel().early_arrivals() == 2; }, "two early arrivals");
            r.channel().cancel(5, 9);
            RANK_CHECK(r.channel().early_arrivals() == 0,
                       std::to_string(r.channel().early_arrivals()) +
                           " early arrivals of a withdrawn call left");
            r.bootstrap().barrier("withdrawn");
            std::vector<std::byte> marker(8);
            Transfer got;
            r.channel().recv(0, 10, marker.data(), marker.size(), record(got));
            r.wait([&] { return got.done; }, "the message after");
            RANK_CHECK(got.status.ok(), got.status.to_string());
            RANK_CHECK(r.channel().early_arrivals() == 0,
                       std::to_string(r.channel().early_arrivals()) +
                           " messages for a withdrawn call kept after it");
          }
          r.bootstrap().barrier("end");
          return 0;
        },
        single_copy_from(threshold)));
  }
}

// A burst of early arrivals (200 messages of 60 KiB, more than the pool keeps) takes memory
// while it waits; once every one has been taken, the channel gives that memory back, and a
// few early arrivals later it holds no more than a few blocks again.
TEST(ShmChannel, ABurstOfEarlyArrivalsIsGivenBackOnceTaken) {
  constexpr int kMessages = 200;
  constexpr size_t kBytes = 60 << 10;
  expect_all_ok(run_ranks(
      2,
      [&](int me, int) {
        runtime::ShmEndpoint r;
        std::vector<std::byte> data(kBytes, std::byte{3});
        std::vector<Transfer> transfers(kMessages);
        if (me == 0) {
          for (int i = 0; i < kMessages; ++i)
            r.channel().send(1, static_cast<uint64_t>(i), data.data(), kBytes,
                             record(transfers[i]));
          r.wait([&] { return transfers.back().done; }, "the sends");
        } else {
          r.wait([&] { return r.channel().early_arrivals() == kMessages; }, "the burst");
          const size_t during = r.channel().early_arrival_bytes();
          RANK_CHECK(during >= kMessages * kBytes, std::to_string(during) + " bytes held");
          std::vector<std::byte> into(kMessages * kBytes);
          for (int i = 0; i < kMessages; ++i) {
            r.channel().recv(0, static_cast<uint64_t>(i), into.data() + i * kBytes, kBytes,
                             record(transfers[i]));
          }
          r.wait([&] { return transfers.back().done; }, "the receives");
          RANK_CHECK(into.back() == std::byte{3}, "the data");
          RANK_CHECK(r.channel().early_arrival_bytes() == 0,
                     std::to_string(r.channel().early_arrival_bytes()) +
                         " bytes still held once every early arrival was taken");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      single_copy_from("0")));
}

// A peer that writes garbage into its ring: the receiver fails that peer, naming it and what was
// wrong, instead of copying past the slot or its buffer or setting aside what a header claims,
// and the receive waiting on it fails. One job per kind of garbage: a first fragment larger
// than a slot, a message announcing more bytes than the largest message, a first fragment
// larger than its message, a continued fragment with no message under way, a kind that does
// not exist, a message begun while another (set aside for a receive not yet posted) is under
// way. The segment is made here before the ranks fork, so rank 0 can write into its ring
// by hand, after a whole message that makes rank 1 poll it.
TEST(ShmChannel, AMalformedFragmentFailsItsSender) {
  using transport::shm::FragmentHeader;
  using transport::shm::FragmentKind;
  using transport::shm::Ring;
  using transport::shm::SharedSegment;
  using transport::shm::ShmChannel;
  const std::vector<std::vector<FragmentHeader>> garbage = {
      {{1, 100, 60000, FragmentKind::first}},
      {{1, uint64_t{1} << 50, 10, FragmentKind::first}},
      {{1, 5, 10, FragmentKind::first}},
      {{1, 100, 10, FragmentKind::more}},
      {{1, 100, 10, static_cast<FragmentKind>(77)}},
      {{2, 100, 10, FragmentKind::first}, {1, 100, 10, FragmentKind::first}},
  };
  for (const std::vector<FragmentHeader>& headers : garbage) {
    const FragmentHeader& bad = headers.back();
    SCOPED_TRACE(std::to_string(headers.size()) + " fragments, the last of kind " +
                 std::to_string(static_cast<uint32_t>(bad.kind)) + ", total " +
                 std::to_string(bad.total) + ", bytes " + std::to_string(bad.bytes));
    const std::string name = "/ibcoll-malformed-" + std::to_string(getpid());
    const size_t bytes = ShmChannel::segment_bytes(2);
    SharedSegment segment = SharedSegment::create(name, bytes);
    auto exits = run_ranks(2, [&](int me, int) {
      ShmChannel channel(me, 2, SharedSegment::open(name, bytes, std::chrono::seconds(5)));
      if (me == 0) {
        // A whole message first, as a sender does, so rank 1 polls this ring.
        const std::byte one{1};
        Transfer sent;
        channel.send(1, 9, &one, 1, record(sent));
        while (!sent.done)
          channel.poll();
        RANK_CHECK(sent.status.ok(), sent.status.to_string());
        const Ring ring(segment.data() + ShmChannel::ring_offset(0, 1, 2));
        for (const FragmentHeader& header : headers) {
          std::memcpy(ring.slot_to_fill(), &header, sizeof(header));
          ring.publish();
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));  // alive while rank 1 reads it
        return 0;
      }
      std::vector<std::byte> into(100, kFill);
      Transfer t;
      channel.recv(0, 1, into.data(), into.size(), record(t));
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!t.done && std::chrono::steady_clock::now() < end)
        channel.poll();
      RANK_CHECK(t.done && t.status.code() == Code::peer_failed &&
                     t.status.message().find("malformed") != std::string::npos,
                 t.done ? t.status.to_string() : "the receive never ended");
      RANK_CHECK(into[0] == kFill, "bytes of a malformed fragment landed");
      return 0;
    });
    segment.unlink();
    expect_all_ok(exits);
  }
}

TEST(ShmChannel, SegmentIsUnlinkedOnceAttachedAndBadArgumentsAreNamed) {
  expect_all_ok(run_ranks(2, [](int me, int) {
    runtime::ShmEndpoint r;
    const int fd = shm_open(r.segment_name().c_str(), O_RDWR, 0600);
    RANK_CHECK(fd < 0 && errno == ENOENT, "the segment name is still there after set-up");
    char byte = 0;
    const auto ignore = [](const Status&, size_t) {};
    for (int bad : {-1, 2, me}) {
      try {
        r.channel().send(bad, 0, &byte, 1, ignore);
        RANK_CHECK(false, "accepted peer " + std::to_string(bad));
      } catch (const Error& e) {
        RANK_CHECK(
            std::string(e.what()).find("send: peer " + std::to_string(bad)) != std::string::npos,
            e.what());
      }
    }
    try {
      r.channel().recv(1 - me, 0, nullptr, 4, ignore);
      RANK_CHECK(false, "accepted a null buffer");
    } catch (const Error& e) {
      RANK_CHECK(std::string(e.what()).find("recv: buffer is null") != std::string::npos, e.what());
    }
    r.bootstrap().barrier("end");
    return 0;
  }));
}

TEST(SharedSegment, IsCreatedPrivateAndRefusesAnExistingName) {
  const std::string name = "/ibcoll-test-" + std::to_string(getpid());
  auto segment = transport::shm::SharedSegment::create(name, 8192);
  struct stat info {};
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(fstat(fd, &info), 0);
  close(fd);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  EXPECT_THROW(transport::shm::SharedSegment::create(name, 8192), Error);
  segment.unlink();
  EXPECT_THROW(transport::shm::SharedSegment::open(name, 8192, std::chrono::milliseconds(20)),
               Error);
}

}  // namespace
}  // namespace ibcoll::testing
