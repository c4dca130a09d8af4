#include "runtime/bootstrap/pmix_bootstrap.h"

#include <pmix.h>

#include <cstring>

#include "base/status.h"

namespace ibcoll::runtime {
namespace {

// Keys are this library's own among whatever else the job's processes put (an MPI library's).
constexpr const char* kKeyPrefix = "ibcoll.";

std::string failure_text(const char* call, pmix_status_t rc) {
  return std::string("bootstrap: ") + call + " failed: " + PMIx_Error_string(rc);
}

pmix_proc_t proc_of(const std::string& nspace, pmix_rank_t rank) {
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, nspace.c_str(), rank);
  return proc;
}

// A value the launcher keeps about the job (PMIX_JOB_SIZE), as an unsigned number.
uint32_t job_number(const std::string& nspace, const char* key) {
  const pmix_proc_t job = proc_of(nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* value = nullptr;
  const pmix_status_t rc = PMIx_Get(&job, key, nullptr, 0, &value);
  if (rc != PMIX_SUCCESS) throw Error(Code::system_error, failure_text(key, rc));
  uint32_t number = 0;
  const bool known = value->type == PMIX_UINT32;
  if (known) number = value->data.uint32;
  PMIX_VALUE_RELEASE(value);
  if (!known) throw Error(Code::internal, std::string("bootstrap: ") + key + " is not a uint32");
  return number;
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
  nspace_ = me.nspace;
  rank_ = static_cast<int>(me.rank);
  try {
    size_ = static_cast<int>(job_number(nspace_, PMIX_JOB_SIZE));
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
  const std::string key = kKeyPrefix + name;
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

  pmix_info_t options[2];
  for (pmix_info_t& option : options)
    PMIX_INFO_CONSTRUCT(&option);
  size_t count = 0;
  bool collect = true;
  PMIx_Info_load(&options[count++], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  // Whole seconds, rounded up: PMIX_TIMEOUT 0 would mean none.
  int seconds = static_cast<int>((timeout_.count() + 999) / 1000);
  if (seconds > 0) PMIx_Info_load(&options[count++], PMIX_TIMEOUT, &seconds, PMIX_INT);
  const pmix_proc_t everyone = proc_of(nspace_, PMIX_RANK_WILDCARD);
  rc = PMIx_Fence(&everyone, 1, options, count);
  for (size_t i = 0; i < count; ++i)
    PMIX_INFO_DESTRUCT(&options[i]);
  // A rank that dies during the fence makes it PARTIAL_SUCCESS; one dead before it is left out
  // of it (SUCCESS, under mpirun --enable-recovery), and only its missing part tells.
  if (rc != PMIX_SUCCESS) {
    throw Error(rc == PMIX_ERR_TIMEOUT ? Code::timeout : Code::peer_failed,
                failure_text(("PMIx_Fence (" + name + ")").c_str(), rc));
  }

  // The fence collected every part here: a part not here is a rank's that never gave it. Asking
  // the server for it instead would wait for good (PMIx_Get takes no deadline from PMIX_TIMEOUT).
  pmix_info_t only_here;
  PMIX_INFO_CONSTRUCT(&only_here);
  bool optional = true;
  PMIx_Info_load(&only_here, PMIX_OPTIONAL, &optional, PMIX_BOOL);
  std::vector<std::string> all(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    const pmix_proc_t peer = proc_of(nspace_, static_cast<pmix_rank_t>(r));
    pmix_value_t* got = nullptr;
    rc = PMIx_Get(&peer, key.c_str(), &only_here, 1, &got);
    if (rc != PMIX_SUCCESS) {
      PMIX_INFO_DESTRUCT(&only_here);
      throw Error(Code::peer_failed, "bootstrap: rank " + std::to_string(r) + "'s part of " + name +
                                         " is missing after the fence (" + PMIx_Error_string(rc) +
                                         "): it has left the job");
    }
    const bool whole = got->type == PMIX_BYTE_OBJECT && got->data.bo.size > 0;
    if (whole) all[static_cast<size_t>(r)].assign(got->data.bo.bytes + 1, got->data.bo.size - 1);
    PMIX_VALUE_RELEASE(got);
    if (!whole) {
      PMIX_INFO_DESTRUCT(&only_here);
      throw Error(Code::internal, "bootstrap: rank " + std::to_string(r) + "'s " + name +
                                      " is not this library's part");
    }
  }
  PMIX_INFO_DESTRUCT(&only_here);
  return all;
}

}  // namespace ibcoll::runtime
