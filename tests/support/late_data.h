// A rank gives up on a large bcast (its deadline passes) while the root, stopped by a signal,
// is midway through sending it. Once the root goes on, nothing of that call may land in the
// receiver's buffer any more: the receiver fills the buffer after its call returned and finds
// it untouched, however much of the root's message still comes. (Over verbs the device sends
// what the root posted even while the root is stopped, so there the channel tests stop the
// sender between a rendezvous's answer and its write instead: tests/rxe.)
#pragma once

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <thread>
#include <vector>

#include "tests/support/collectives.h"

namespace ibcoll::testing {

// Rank 0 is the root, rank 1 the receiver of a bcast of `bytes`; the caller sets a short
// IBCOLL_TIMEOUT and turns the call check off, so that the receive is posted when the call
// starts; the root starts once it is (a message that came first would wait whole in a buffer
// of its own and reach the caller's only at its end).
inline int late_data_after_a_timeout(int me, size_t bytes) {
  CapiRank r;
  std::vector<int64_t> pids(2, 0);  // so that the receiver can stop and continue the root
  pids[static_cast<size_t>(me)] = getpid();
  RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, pids.data(), 2, IBCOLL_INT64, IBCOLL_SUM,
                              r.world()) == IBCOLL_SUCCESS,
             ibcoll_last_error());
  constexpr auto kUnset = std::byte{0}, kMine = std::byte{0x5A};
  std::vector<std::byte> data(bytes, me == 0 ? std::byte{1} : kUnset);
  ibcoll_request_t request = nullptr;
  const auto start = [&] {
    RANK_CHECK(
        ibcoll_ibcast(data.data(), bytes, IBCOLL_UINT8, 0, r.world(), &request) == IBCOLL_SUCCESS,
        ibcoll_last_error());
  };
  if (me == 1) start();
  meet_without_ibcoll("late-data-posted", me, {0, 1});
  if (me == 0) {
    start();  // stopped midway by the receiver, then on: its sends end one way or another
    // Slowly (a ringful per millisecond at most), so the receiver sees the first bytes long
    // before the last are sent.
    for (int done = 0; !done;) {
      if (ibcoll_test(request, &done) != IBCOLL_SUCCESS) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ibcoll_request_free(&request);
    return 0;
  }
  int done = 0;
  while (data[0] == kUnset && !done)
    RANK_CHECK(ibcoll_test(request, &done) == IBCOLL_SUCCESS, ibcoll_last_error());
  RANK_CHECK(!done, "the bcast ended before the root was stopped");
  kill(static_cast<pid_t>(pids[0]), SIGSTOP);
  const ibcoll_status_t s = ibcoll_wait(request);
  RANK_CHECK(s == IBCOLL_ERR_TIMEOUT, std::string("the receiver's call: ") + ibcoll_status_name(s) +
                                          ": " + ibcoll_last_error());
  RANK_CHECK(data[bytes - 1] == kUnset,
             "the message was whole before the root stopped: nothing was left to land late");
  std::fill(data.begin(), data.end(), kMine);  // the caller's buffer again
  kill(static_cast<pid_t>(pids[0]), SIGCONT);
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < end)  // the rest of the root's message comes
    ibcoll_progress(r.context());
  const size_t changed = static_cast<size_t>(
      std::count_if(data.begin(), data.end(), [&](std::byte b) { return b != kMine; }));
  RANK_CHECK(changed == 0,
             std::to_string(changed) + " bytes of the timed-out call landed after it returned");
  RANK_CHECK(ibcoll_request_free(&request) == IBCOLL_SUCCESS, ibcoll_last_error());
  return 0;
}

}  // namespace ibcoll::testing
