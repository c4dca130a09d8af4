#include "runtime/bootstrap/pmix_bootstrap.h"

#include <pmix.h>

#include <atomic>

#include "base/status.h"
#include "runtime/bootstrap/pmix_watched_fence.h"

namespace ibcoll::runtime {
namespace {

// Contexts a process has made over PMIx, in order. Every rank makes them in the same order, so
// the number tells a key of this context from the same key of an earlier one (whose part may
// still be in the node's store).
std::atomic<int> contexts_made{0};

// PMIx stays initialized from the first context to the end of the process (or the unloading of
// the library). Finalizing at each context's end disconnects the process from its server: a rank
// already in the next context's first fence while another was still finalizing saw that one as
// gone (PMIx_Fence returned PARTIAL_SUCCESS, launch.Mpirun.two-contexts_Np3 under load), and the
// late one then waited in a fence of its own. PMIx counts initializations, so a context's own
// PMIx_Init and PMIx_Finalize only move the count above the one held here.
void hold_pmix_for_the_process() {
  struct Hold {
    bool held = false;
    Hold() {
      pmix_proc_t me;
      held = PMIx_Init(&me, nullptr, 0) == PMIX_SUCCESS;
    }
    ~Hold() {
      if (held) PMIx_Finalize(nullptr, 0);
    }
  };
  static Hold hold;
}

std::string failure_text(const std::string& call, pmix_status_t rc) {
  return "bootstrap: " + call + " failed: " + PMIx_Error_string(rc);
}

pmix_proc_t proc_of(const std::string& nspace, pmix_rank_t rank) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, nspace.c_str(), rank);
  return proc;
}

// Owners of what PMIx hands out or what holds PMIx's copies.
struct Value {
  pmix_value_t* value = nullptr;
  ~Value() {
    if (value) PMIX_VALUE_RELEASE(value);
  }
};
struct Infos {
  pmix_info_t info[2];
  size_t count = 0;
  Infos() {
    for (pmix_info_t& i : info)
      PMIX_INFO_CONSTRUCT(&i);
  }
  ~Infos() {
    for (pmix_info_t& i : info)
      PMIX_INFO_DESTRUCT(&i);
  }
  template <typename T>
  void add(const char* key, T* data, pmix_data_type_t type) {
    if (PMIx_Info_load(&info[count++], key, data, type) != PMIX_SUCCESS)
      throw Error(Code::internal, std::string("bootstrap: cannot load PMIx info ") + key);
  }
};

// A value the launcher keeps about the job (PMIX_JOB_SIZE), as an unsigned number.
uint32_t job_number(const std::string& nspace, const char* key) {
  const pmix_proc_t job = proc_of(nspace, PMIX_RANK_WILDCARD);
  Value got;
  const pmix_status_t rc = PMIx_Get(&job, key, nullptr, 0, &got.value);
  if (rc != PMIX_SUCCESS) throw Error(Code::system_error, failure_text(key, rc));
  if (got.value->type != PMIX_UINT32) {
    throw Error(Code::internal, std::string("bootstrap: ") + key + " is not a uint32");
  }
  return got.value->data.uint32;
}

// Reads a rank's part after the collecting fence. Under gds/ds21 (PMIx's default) the fence left
// every part in the node's shared store, and a get that may not ask the server finds it there.
// Under gds/hash the parts stay with the server, so a part not found here is asked of it, with
// PMIX_IMMEDIATE: the fence stored every part it gathered before it let the ranks go, so one the
// server lacks now never comes, and it says so at once (without, it would wait 2 s for a rank
// of this node, and for one of another node ask that node's daemon, which waits for good).
pmix_status_t get_part(const pmix_proc_t& peer, const std::string& key, Value& got) {
  Infos only_here;
  bool yes = true;
  only_here.add(PMIX_OPTIONAL, &yes, PMIX_BOOL);
  pmix_status_t rc = PMIx_Get(&peer, key.c_str(), only_here.info, only_here.count, &got.value);
  if (rc != PMIX_ERR_NOT_FOUND) return rc;
  Infos from_server;
  from_server.add(PMIX_IMMEDIATE, &yes, PMIX_BOOL);
  return PMIx_Get(&peer, key.c_str(), from_server.info, from_server.count, &got.value);
}

}  // namespace

PmixBootstrap::PmixBootstrap(std::chrono::milliseconds timeout) : timeout_(timeout) {
  pmix_proc_t me;
  const pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    throw Error(Code::not_supported, failure_text("PMIx_Init", rc) +
                                         " (no PMIx server: was this process started by "
                                         "mpirun or srun --mpi=pmix?)");
  }
  try {
    hold_pmix_for_the_process();
    nspace_ = me.nspace;
    size_ = static_cast<int>(job_number(nspace_, PMIX_JOB_SIZE));
    if (me.rank >= static_cast<pmix_rank_t>(size_)) {
      throw Error(Code::internal, "bootstrap: PMIx says rank " + std::to_string(me.rank) + " of " +
                                      std::to_string(size_));
    }
    rank_ = static_cast<int>(me.rank);
    key_prefix_ = "ibcoll." + std::to_string(contexts_made++) + ".";
  } catch (...) {
    PMIx_Finalize(nullptr, 0);
    throw;
  }
}

PmixBootstrap::~PmixBootstrap() {
  PMIx_Finalize(nullptr, 0);
}

std::string PmixBootstrap::describe() const {
  return "PMIx (namespace " + nspace_ + ")";
}

std::vector<std::string> PmixBootstrap::allgather(const std::string& name,
                                                  const std::string& mine) {
  const std::string key = key_prefix_ + name;
  if (key.size() > PMIX_MAX_KEYLEN) throw Error(Code::internal, "bootstrap: key too long: " + key);
  // Every part starts with one byte, so none is empty (an empty byte object has no bytes).
  std::string part = "p" + mine;
  pmix_value_t value;
  value.type = PMIX_BYTE_OBJECT;
  value.data.bo.bytes = part.data();
  value.data.bo.size = part.size();
  pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key.c_str(), &value);  // copies the bytes
  if (rc != PMIX_SUCCESS) throw Error(Code::system_error, failure_text("PMIx_Put", rc));
  rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) throw Error(Code::system_error, failure_text("PMIx_Commit", rc));

  Infos fence;
  bool collect = true;
  fence.add(PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  // Whole seconds, rounded up: PMIX_TIMEOUT 0 would mean none.
  int seconds = static_cast<int>((timeout_.count() + 999) / 1000);
  if (seconds > 0) fence.add(PMIX_TIMEOUT, &seconds, PMIX_INT);
  const WatchedFence fenced = watched_fence(nspace_, fence.info, fence.count, timeout_);
  // A rank that dies during the fence makes it PARTIAL_SUCCESS; one that joined PMIx and died
  // before it is left out of it (SUCCESS, under mpirun --enable-recovery), and only its missing
  // part tells. One that died before joining PMIx, Open MPI's mpirun reports to no one, nor
  // always one that joined: the launcher's table of this node's processes tells, or else the
  // fence's deadline ends the wait.
  if (fenced.ended_rank) {
    throw Error(Code::peer_failed, "bootstrap: rank " + std::to_string(*fenced.ended_rank) +
                                       " ended before the PMIx fence (" + name +
                                       ") was done: the launcher says " + fenced.ended_state);
  }
  if (fenced.status == PMIX_ERR_TIMEOUT) {
    throw Error(Code::timeout, "bootstrap: not every rank came to the PMIx fence (" + name +
                                   ") within " + std::to_string(seconds) +
                                   " s (IBCOLL_TIMEOUT): a rank died or is stuck before it");
  }
  if (fenced.status != PMIX_SUCCESS) {
    throw Error(Code::peer_failed, failure_text("PMIx_Fence (" + name + ")", fenced.status));
  }

  std::vector<std::string> all(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    Value got;
    rc = get_part(proc_of(nspace_, static_cast<pmix_rank_t>(r)), key, got);
    if (rc != PMIX_SUCCESS) {
      throw Error(Code::peer_failed, "bootstrap: rank " + std::to_string(r) + "'s part of " + name +
                                         " is missing after the fence (" + PMIx_Error_string(rc) +
                                         "): it has left the job");
    }
    if (!got.value || got.value->type != PMIX_BYTE_OBJECT || got.value->data.bo.size == 0) {
      throw Error(Code::internal, "bootstrap: rank " + std::to_string(r) + "'s " + name +
                                      " is not this library's part");
    }
    all[static_cast<size_t>(r)].assign(got.value->data.bo.bytes + 1, got.value->data.bo.size - 1);
  }
  return all;
}

}  // namespace ibcoll::runtime
