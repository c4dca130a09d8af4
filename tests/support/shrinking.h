// Going on after failures, as a test's rank does it: the members a communicator's last agreement
// held failed, and shrinking until a communicator of the survivors serves a call (a member may
// die inside a shrink, after its agreement had decided without holding it failed: then the
// survivors' next call fails, and they shrink again).
#pragma once

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/collectives.h"

namespace ibcoll::testing {

// The ranks of `comm` its last agreement held failed (ibcoll_comm_failed_ranks), in order.
inline std::vector<int> agreed_failed(ibcoll_comm_t comm) {
  std::vector<int> ranks(static_cast<size_t>(comm_size(comm)));
  int count = -1;
  RANK_CHECK(ibcoll_comm_failed_ranks(comm, ranks.data(), static_cast<int>(ranks.size()), &count) ==
                 IBCOLL_SUCCESS,
             ibcoll_last_error());
  ranks.resize(static_cast<size_t>(count));
  return ranks;
}

struct Shrunk {
  ibcoll_comm_t comm = nullptr;  // of the survivors: free it
  std::vector<int> members;      // its job ranks, in order
  std::vector<int> held_failed;  // the job ranks the agreements held failed, in their order
  int shrinks = 0;
};

// Shrinks `comm` (whose members are the job ranks `members`, in order; it stays) until the new
// communicator serves an allreduce, at most four times; `after_shrink` runs after each (a test's
// victim dies there at the latest). Every failed call must be a lost peer.
inline Shrunk shrink_until_it_serves(ibcoll_comm_t comm, std::vector<int> members,
                                     const std::function<void()>& after_shrink = {}) {
  Shrunk s;
  s.members = std::move(members);
  ibcoll_comm_t current = comm;
  for (;; ++s.shrinks) {
    RANK_CHECK(s.shrinks < 4, "4 shrinks and no communicator of the survivors serves a call");
    ibcoll_comm_t next = nullptr;
    RANK_CHECK(ibcoll_comm_shrink(current, &next) == IBCOLL_SUCCESS,
               std::string("shrink: ") + ibcoll_last_error());
    if (after_shrink) after_shrink();
    std::vector<int> kept;
    const std::vector<int> failed = agreed_failed(current);
    for (size_t m = 0; m < s.members.size(); ++m) {
      if (std::find(failed.begin(), failed.end(), static_cast<int>(m)) == failed.end()) {
        kept.push_back(s.members[m]);
      } else {
        s.held_failed.push_back(s.members[m]);
      }
    }
    if (current != comm) ibcoll_comm_free(&current);
    current = next;
    s.members = std::move(kept);
    int64_t one = 1;
    const ibcoll_status_t status =
        ibcoll_allreduce(IBCOLL_IN_PLACE, &one, 1, IBCOLL_INT64, IBCOLL_SUM, current);
    if (status == IBCOLL_SUCCESS) {
      RANK_CHECK(one == static_cast<int64_t>(s.members.size()), "a count of the survivors");
      s.comm = current;
      ++s.shrinks;
      return s;
    }
    RANK_CHECK(status == IBCOLL_ERR_PEER_FAILED,
               std::string("a call on a shrunken communicator: ") + ibcoll_status_name(status) +
                   ": " + ibcoll_last_error());
  }
}

}  // namespace ibcoll::testing
