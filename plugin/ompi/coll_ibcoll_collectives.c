/* MPI_Allreduce, MPI_Bcast, MPI_Iallreduce and MPI_Ibcast through ibcoll, or through the saved
 * previous module for what ibcoll does not take. Non-blocking calls become Open MPI requests
 * that the progress callback completes. */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>

#include "coll_ibcoll.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "ompi/request/request.h"
#include "opal/util/output.h"

/* ---- what ibcoll takes ---------------------------------------------------------------------- */

static bool ibcoll_type_of(struct ompi_datatype_t* type, ibcoll_datatype_t* out) {
  static const struct {
    MPI_Datatype mpi;
    ibcoll_datatype_t ibcoll;
  } table[] = {
    {MPI_INT8_T, IBCOLL_INT8},
    {MPI_SIGNED_CHAR, IBCOLL_INT8},
    {MPI_UINT8_T, IBCOLL_UINT8},
    {MPI_UNSIGNED_CHAR, IBCOLL_UINT8},
    {MPI_BYTE, IBCOLL_UINT8},
    {MPI_INT16_T, IBCOLL_INT16},
    {MPI_SHORT, IBCOLL_INT16},
    {MPI_UINT16_T, IBCOLL_UINT16},
    {MPI_UNSIGNED_SHORT, IBCOLL_UINT16},
    {MPI_INT32_T, IBCOLL_INT32},
    {MPI_INT, IBCOLL_INT32},
    {MPI_UINT32_T, IBCOLL_UINT32},
    {MPI_UNSIGNED, IBCOLL_UINT32},
    {MPI_INT64_T, IBCOLL_INT64},
    {MPI_LONG_LONG, IBCOLL_INT64},
    {MPI_UINT64_T, IBCOLL_UINT64},
    {MPI_UNSIGNED_LONG_LONG, IBCOLL_UINT64},
    {MPI_FLOAT, IBCOLL_FLOAT32},
    {MPI_DOUBLE, IBCOLL_FLOAT64},
#if SIZEOF_LONG == 8
    {MPI_LONG, IBCOLL_INT64},
    {MPI_UNSIGNED_LONG, IBCOLL_UINT64},
#endif
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (table[i].mpi == type) {
      *out = table[i].ibcoll;
      return true;
    }
  }
  return false;
}

static bool ibcoll_op_of(struct ompi_op_t* op, ibcoll_op_t* out) {
  static const struct {
    MPI_Op mpi;
    ibcoll_op_t ibcoll;
  } table[] = {{MPI_SUM, IBCOLL_SUM},  {MPI_PROD, IBCOLL_PROD}, {MPI_MIN, IBCOLL_MIN},
               {MPI_MAX, IBCOLL_MAX},  {MPI_BAND, IBCOLL_BAND}, {MPI_BOR, IBCOLL_BOR},
               {MPI_BXOR, IBCOLL_BXOR}};
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (table[i].mpi == op) {
      *out = table[i].ibcoll;
      return true;
    }
  }
  return false;
}

static bool within(size_t bytes, size_t limit) {
  return limit == 0 || bytes <= limit;
}

typedef struct {
  const void* send;
  void* recv;
  size_t count;
  ibcoll_datatype_t type;
  ibcoll_op_t op;
} allreduce_call_t;

/* A predefined type and op ibcoll has, at most allreduce_max_bytes. */
static bool take_allreduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dtype,
                           struct ompi_op_t* op, allreduce_call_t* call) {
  size_t size = 0;
  if (!ibcoll_type_of(dtype, &call->type) || !ibcoll_op_of(op, &call->op)) return false;
  ompi_datatype_type_size(dtype, &size);
  if (!within(size * (size_t)count, mca_coll_ibcoll_component.allreduce_max_bytes)) return false;
  call->send = sbuf == MPI_IN_PLACE ? IBCOLL_IN_PLACE : sbuf;
  call->recv = rbuf;
  call->count = (size_t)count;
  return true;
}

/* Any datatype whose `count` elements lie contiguously from `buf`, as bytes. */
static bool take_bcast(int count, struct ompi_datatype_t* dtype, size_t* bytes) {
  ptrdiff_t true_lb = 0, true_extent = 0;
  size_t size = 0;
  if (!ompi_datatype_is_contiguous_memory_layout(dtype, count)) return false;
  ompi_datatype_get_true_extent(dtype, &true_lb, &true_extent);
  ompi_datatype_type_size(dtype, &size);
  *bytes = size * (size_t)count;
  return true_lb == 0 && within(*bytes, mca_coll_ibcoll_component.bcast_max_bytes);
}

/* ---- outcomes -------------------------------------------------------------------------------- */

static int mpi_error_of(ibcoll_status_t status) {
  switch (status) {
    case IBCOLL_SUCCESS:
      return MPI_SUCCESS;
    case IBCOLL_ERR_INVALID_ARGUMENT:
      return MPI_ERR_ARG;
    case IBCOLL_ERR_TRUNCATED:
      return MPI_ERR_TRUNCATE;
    default:
      return MPI_ERR_OTHER;
  }
}

/* A failed call says why before the communicator's error handler runs. */
static int outcome(ibcoll_status_t status, const char* call, ompi_communicator_t* comm) {
  if (status != IBCOLL_SUCCESS) {
    opal_output(0, "coll:ibcoll: %s on %s failed: %s", call, comm->c_name, ibcoll_last_error());
  }
  return mpi_error_of(status);
}

static void note(const char* call, const char* route, ompi_communicator_t* comm, size_t count) {
  opal_output_verbose(10, mca_coll_ibcoll_component.output, "coll:ibcoll: %s of %zu on %s: %s",
                      call, count, comm->c_name, route);
}

/* A call's way: when ibcoll takes it (`taken`: datatype, op and size) and the communicator
 * maps, its ibcoll communicator with the lock held (the caller unlocks after the call), counted
 * in `counter`; otherwise NULL, unlocked, counted as a fallback. The log says which. */
static ibcoll_comm_t enter(mca_coll_ibcoll_module_t* m, bool taken, unsigned long* counter,
                           const char* call, int count) {
  mca_coll_ibcoll_lock();
  ibcoll_comm_t ic = taken ? mca_coll_ibcoll_comm_of(m) : NULL;
  ++*(ic ? counter : &mca_coll_ibcoll_component.counters.fallback);
  note(call, ic ? "ibcoll" : "fallback", m->comm, (size_t)count);
  if (!ic) mca_coll_ibcoll_unlock();
  return ic;
}

/* ---- blocking -------------------------------------------------------------------------------- */

int mca_coll_ibcoll_allreduce(const void* sbuf, void* rbuf, int count,
                              struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                              struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  allreduce_call_t call;
  const bool taken = take_allreduce(sbuf, rbuf, count, dtype, op, &call);
  ibcoll_comm_t ic =
      enter(m, taken, &mca_coll_ibcoll_component.counters.allreduce, "MPI_Allreduce", count);
  if (!ic) {
    return m->previous_allreduce(sbuf, rbuf, count, dtype, op, comm, m->previous_allreduce_module);
  }
  const int rc = outcome(ibcoll_allreduce(call.send, call.recv, call.count, call.type, call.op, ic),
                         "MPI_Allreduce", comm);
  mca_coll_ibcoll_unlock();
  return rc;
}

int mca_coll_ibcoll_bcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                          struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  size_t bytes = 0;
  const bool taken = take_bcast(count, dtype, &bytes);
  ibcoll_comm_t ic = enter(m, taken, &mca_coll_ibcoll_component.counters.bcast, "MPI_Bcast", count);
  if (!ic) return m->previous_bcast(buf, count, dtype, root, comm, m->previous_bcast_module);
  const int rc = outcome(ibcoll_bcast(buf, bytes, IBCOLL_UINT8, root, ic), "MPI_Bcast", comm);
  mca_coll_ibcoll_unlock();
  return rc;
}

/* ---- non-blocking ---------------------------------------------------------------------------- */

typedef struct {
  ompi_request_t super;
  ibcoll_request_t request;  /* NULL once ended */
  ompi_communicator_t* comm; /* retained until the call ends; named in messages */
  bool freed;                /* MPI_Request_free while running: released when it ends */
} mca_coll_ibcoll_request_t;

static OBJ_CLASS_INSTANCE(mca_coll_ibcoll_request_t, ompi_request_t, NULL, NULL);

static mca_coll_ibcoll_request_t** running; /* guarded by the lock */
static size_t running_count, running_capacity;

static void release(mca_coll_ibcoll_request_t* r) {
  OMPI_REQUEST_FINI(&r->super);
  OBJ_RELEASE(r);
}

static int request_free(ompi_request_t** request) {
  mca_coll_ibcoll_request_t* r = (mca_coll_ibcoll_request_t*)*request;
  mca_coll_ibcoll_lock();
  if (r->request) {
    r->freed = true;
  } else {
    release(r);
  }
  mca_coll_ibcoll_unlock();
  *request = MPI_REQUEST_NULL;
  return OMPI_SUCCESS;
}

static int request_cancel(ompi_request_t* request, int complete) {
  (void)request;
  (void)complete;
  return OMPI_SUCCESS; /* collectives cannot be cancelled; MPI_Cancel on one is erroneous */
}

/* Wraps a started ibcoll request into *out; without memory, frees it and says so. */
static int track_request(ibcoll_request_t request, ompi_communicator_t* comm,
                         ompi_request_t** out) {
  if (running_count == running_capacity) {
    const size_t capacity = running_capacity ? 2 * running_capacity : 16;
    mca_coll_ibcoll_request_t** grown = realloc(running, capacity * sizeof(*running));
    if (!grown) {
      ibcoll_request_free(&request);
      return MPI_ERR_NO_MEM;
    }
    running = grown;
    running_capacity = capacity;
  }
  mca_coll_ibcoll_request_t* r = OBJ_NEW(mca_coll_ibcoll_request_t);
  OMPI_REQUEST_INIT(&r->super, false);
  r->super.req_type = OMPI_REQUEST_COLL;
  r->super.req_state = OMPI_REQUEST_ACTIVE;
  r->super.req_free = request_free;
  r->super.req_cancel = request_cancel;
  r->request = request;
  r->comm = comm;
  OBJ_RETAIN(comm); /* MPI_Comm_free meanwhile must not take the ibcoll communicator away */
  r->freed = false;
  running[running_count++] = r;
  *out = &r->super;
  return MPI_SUCCESS;
}

void mca_coll_ibcoll_forget_requests(void) {
  free(running);
  running = NULL;
  running_count = running_capacity = 0;
}

bool mca_coll_ibcoll_requests_pending(void) {
  mca_coll_ibcoll_lock();
  const bool pending = running_count > 0;
  mca_coll_ibcoll_unlock();
  return pending;
}

/* From Open MPI's progress loop: moves ibcoll along and completes the requests that ended. A
 * thread already inside ibcoll (a blocking call runs opal_progress in its waits) holds the
 * lock, and then this returns at once. */
int mca_coll_ibcoll_progress(void) {
  enum { kBatch = 64 }; /* completed per call; more wait for the next */
  mca_coll_ibcoll_request_t* ended[kBatch];
  ompi_communicator_t* ended_comms[kBatch];
  size_t n = 0;
  if (!mca_coll_ibcoll_trylock()) return 0;
  for (size_t i = 0; i < running_count && n < kBatch;) {
    mca_coll_ibcoll_request_t* r = running[i];
    int done = 0;
    const ibcoll_status_t s = ibcoll_test(r->request, &done);
    if (!done) {
      ++i;
      continue;
    }
    r->super.req_status.MPI_ERROR = outcome(s, "a non-blocking collective", r->comm);
    ibcoll_request_free(&r->request);
    ended_comms[n] = r->comm;
    running[i] = running[--running_count];
    OBJ_RETAIN(r); /* alive until completed here, even if its owner frees it meanwhile */
    ended[n++] = r;
  }
  mca_coll_ibcoll_unlock();
  for (size_t i = 0; i < n; ++i) {
    mca_coll_ibcoll_request_t* r = ended[i];
    mca_coll_ibcoll_lock();
    const bool freed = r->freed;
    mca_coll_ibcoll_unlock();
    if (freed) {
      release(r);
    } else {
      ompi_request_complete(&r->super, true);
    }
    OBJ_RELEASE(r);
    OBJ_RELEASE(ended_comms[i]); /* may free the communicator, and with it the module */
  }
  return (int)n;
}

int mca_coll_ibcoll_iallreduce(const void* sbuf, void* rbuf, int count,
                               struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                               struct ompi_communicator_t* comm, ompi_request_t** request,
                               mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  allreduce_call_t call;
  const bool taken = take_allreduce(sbuf, rbuf, count, dtype, op, &call);
  ibcoll_comm_t ic =
      enter(m, taken, &mca_coll_ibcoll_component.counters.iallreduce, "MPI_Iallreduce", count);
  if (!ic) {
    return m->previous_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                  m->previous_iallreduce_module);
  }
  ibcoll_request_t started = NULL;
  int rc =
      outcome(ibcoll_iallreduce(call.send, call.recv, call.count, call.type, call.op, ic, &started),
              "MPI_Iallreduce", comm);
  if (rc == MPI_SUCCESS) rc = track_request(started, comm, request);
  mca_coll_ibcoll_unlock();
  return rc;
}

int mca_coll_ibcoll_ibcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                           struct ompi_communicator_t* comm, ompi_request_t** request,
                           mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  size_t bytes = 0;
  const bool taken = take_bcast(count, dtype, &bytes);
  ibcoll_comm_t ic =
      enter(m, taken, &mca_coll_ibcoll_component.counters.ibcast, "MPI_Ibcast", count);
  if (!ic) {
    return m->previous_ibcast(buf, count, dtype, root, comm, request, m->previous_ibcast_module);
  }
  ibcoll_request_t started = NULL;
  int rc = outcome(ibcoll_ibcast(buf, bytes, IBCOLL_UINT8, root, ic, &started), "MPI_Ibcast", comm);
  if (rc == MPI_SUCCESS) rc = track_request(started, comm, request);
  mca_coll_ibcoll_unlock();
  return rc;
}
