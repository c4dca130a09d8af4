#include "runtime/bootstrap/pmix_watched_fence.h"

#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>

namespace ibcoll::runtime {
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kFirstLook = std::chrono::seconds(1);
constexpr auto kLookEvery = std::chrono::seconds(1);
constexpr auto kAnswerWithin = std::chrono::seconds(1);  // a table not read by then is skipped

// What a non-blocking PMIx call reports, shared by the waiting thread and PMIx's progress
// thread, which may report after the waiter has given up: each holds a reference.
struct Outcome {
  std::mutex mutex;
  std::condition_variable reported;
  bool done = false;
  pmix_status_t status = PMIX_SUCCESS;
  std::optional<pmix_rank_t> ended_rank;  // a table's: the first rank that ended abnormally
  pmix_proc_state_t ended_state = PMIX_PROC_STATE_UNDEF;
  pmix_query_t query;  // a table's request, kept until PMIx answers it
  Outcome() { PMIX_QUERY_CONSTRUCT(&query); }
  ~Outcome() { PMIX_QUERY_DESTRUCT(&query); }

  void report(pmix_status_t s) {
    std::lock_guard lock(mutex);
    status = s;
    done = true;
    reported.notify_all();
  }
  // Waits until reported or `until`; whether it was reported.
  bool wait_until(Clock::time_point until) {
    std::unique_lock lock(mutex);
    return reported.wait_until(lock, until, [&] { return done; });
  }
};
using Shared = std::shared_ptr<Outcome>;

// PMIx takes a raw pointer: a reference of its own, dropped when it reports.
void* reference(const Shared& outcome) {
  return new Shared(outcome);
}
Shared take_reference(void* cbdata) {
  std::unique_ptr<Shared> held(static_cast<Shared*>(cbdata));
  return *held;
}

void fence_done(pmix_status_t status, void* cbdata) {
  take_reference(cbdata)->report(status);
}

// A process's entry in the table, as PMIx 4 gives it (pmix_proc_info_t) or as Open MPI 4.1
// wraps each one (pmix_info_t holding one).
const pmix_proc_info_t* entry(const pmix_data_array_t& table, size_t i) {
  if (table.type == PMIX_PROC_INFO) return &static_cast<const pmix_proc_info_t*>(table.array)[i];
  if (table.type == PMIX_INFO) {
    const pmix_value_t& value = static_cast<const pmix_info_t*>(table.array)[i].value;
    if (value.type == PMIX_PROC_INFO) return value.data.pinfo;
  }
  return nullptr;
}

void table_read(pmix_status_t status, pmix_info_t* info, size_t count, void* cbdata,
                pmix_release_cbfunc_t release, void* release_data) {
  const Shared outcome = take_reference(cbdata);
  std::optional<pmix_rank_t> ended;
  pmix_proc_state_t state = PMIX_PROC_STATE_UNDEF;
  for (size_t i = 0; status == PMIX_SUCCESS && i < count && !ended; ++i) {
    if (std::strcmp(info[i].key, PMIX_QUERY_LOCAL_PROC_TABLE) != 0 ||
        info[i].value.type != PMIX_DATA_ARRAY || !info[i].value.data.darray) {
      continue;
    }
    const pmix_data_array_t& table = *info[i].value.data.darray;
    for (size_t k = 0; k < table.size; ++k) {
      const pmix_proc_info_t* process = entry(table, k);
      // A normal end is left to the fence: a rank the fence has let go may exit before this
      // one hears that the fence is done.
      if (process && process->state >= PMIX_PROC_STATE_ERROR) {
        ended = process->proc.rank;
        state = process->state;
        break;
      }
    }
  }
  if (release) release(release_data);
  std::lock_guard lock(outcome->mutex);
  outcome->ended_rank = ended;
  outcome->ended_state = state;
  outcome->status = status;
  outcome->done = true;
  outcome->reported.notify_all();
}

// The first rank of `nspace` on this node that the launcher says ended abnormally, with its
// state; null when none has, or the launcher does not answer within kAnswerWithin.
std::optional<std::pair<pmix_rank_t, pmix_proc_state_t>> ended_here(const std::string& nspace) {
  auto outcome = std::make_shared<Outcome>();
  pmix_query_t& query = outcome->query;
  pmix_status_t rc = PMIX_SUCCESS;
  PMIX_ARGV_APPEND(rc, query.keys, PMIX_QUERY_LOCAL_PROC_TABLE);
  if (rc != PMIX_SUCCESS) return std::nullopt;
  PMIX_INFO_CREATE(query.qualifiers, 1);
  query.nqual = 1;
  PMIX_INFO_LOAD(&query.qualifiers[0], PMIX_NSPACE, nspace.c_str(), PMIX_STRING);
  void* held = reference(outcome);
  if (PMIx_Query_info_nb(&query, 1, table_read, held) != PMIX_SUCCESS) {
    take_reference(held);  // PMIx will not answer: its reference goes
    return std::nullopt;
  }
  if (!outcome->wait_until(Clock::now() + kAnswerWithin)) return std::nullopt;
  std::lock_guard lock(outcome->mutex);
  if (!outcome->ended_rank) return std::nullopt;
  return std::make_pair(*outcome->ended_rank, outcome->ended_state);
}

}  // namespace

WatchedFence watched_fence(const std::string& nspace, const pmix_info_t* info, size_t count,
                           std::chrono::milliseconds timeout) {
  pmix_proc_t everyone;
  PMIX_LOAD_PROCID(&everyone, nspace.c_str(), PMIX_RANK_WILDCARD);
  auto fence = std::make_shared<Outcome>();
  void* held = reference(fence);
  const pmix_status_t rc = PMIx_Fence_nb(&everyone, 1, info, count, fence_done, held);
  if (rc != PMIX_SUCCESS) {
    take_reference(held);  // done already, or refused: no report comes
    return {rc == PMIX_OPERATION_SUCCEEDED ? PMIX_SUCCESS : rc, std::nullopt, {}};
  }
  const Clock::time_point start = Clock::now();
  // PMIx's own deadline ends the fence first; this one stands in where the launcher ignores it.
  const auto deadline =
      timeout.count() > 0 ? start + timeout + std::chrono::seconds(1) : Clock::time_point::max();
  for (Clock::time_point look = start + kFirstLook;; look += kLookEvery) {
    if (fence->wait_until(std::min(look, deadline))) break;
    if (Clock::now() >= deadline) return {PMIX_ERR_TIMEOUT, std::nullopt, {}};
    if (const auto ended = ended_here(nspace)) {
      return {PMIX_ERR_PROC_ABORTED, ended->first, PMIx_Proc_state_string(ended->second)};
    }
  }
  std::lock_guard lock(fence->mutex);
  return {fence->status, std::nullopt, {}};
}

}  // namespace ibcoll::runtime
