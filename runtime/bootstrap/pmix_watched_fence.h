// A PMIx fence that also watches the launcher's table of this node's processes. Open MPI 4.1's
// mpirun does not always end a fence that a dead rank belonged to: when its notice of a death
// fails ("PMIX ERROR: BAD-PARAM in pmix_event_notification.c", 1 run in 12 of
// launch.Mpirun.joined), the others wait out the fence's deadline. So once the fence has waited
// a second, the table (PMIX_QUERY_LOCAL_PROC_TABLE) is read every second, and a rank of the job
// in it that ended abnormally (killed, aborted, failed) ends the wait at once. Only this node's:
// the whole job's table is as long as the job, and every rank would read it.
#pragma once

#include <pmix.h>

#include <chrono>
#include <optional>
#include <string>

namespace ibcoll::runtime {

struct WatchedFence {
  pmix_status_t status = PMIX_SUCCESS;  // the fence's, where it ended
  // Where a rank of this node ended first: its rank and its state in the launcher's words.
  std::optional<pmix_rank_t> ended_rank;
  std::string ended_state;
};

// Fences every rank of `nspace` with `info`; waits at most `timeout` (0: for good) beyond what
// PMIX_TIMEOUT in `info` gives the launcher, then reports PMIX_ERR_TIMEOUT itself.
WatchedFence watched_fence(const std::string& nspace, const pmix_info_t* info, size_t count,
                           std::chrono::milliseconds timeout);

}  // namespace ibcoll::runtime
