/* MPI_Iallreduce and MPI_Ibcast through ibcoll as Open MPI requests. A request is queued on its
 * module while the communicator's mapping runs, then running (an ibcoll request, or the previous
 * module's when the communicator turned out unusable), then ended: Open MPI's progress loop
 * (mca_coll_ibcoll_progress) notices that and completes it, outside the lock. */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>

#include "coll_ibcoll.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/mca/coll/base/coll_base_util.h"
#include "ompi/op/op.h"
#include "opal/util/output.h"

/* Open MPI's MPI_Ibcast and MPI_Iallreduce treat what a component returns as a non-blocking
 * collective request of the base (ompi_coll_base_retain_datatypes keeps derived datatypes alive
 * in its fields), so ours is one. */
struct mca_coll_ibcoll_request_t {
  ompi_coll_base_nbc_request_t super;
  mca_coll_ibcoll_module_t* module; /* its communicator is retained until the call ends */
  mca_coll_ibcoll_call_t call;      /* the datatype and op are retained too */
  ibcoll_request_t ibcoll;          /* running in ibcoll */
  ompi_request_t* previous;         /* running in the previous module */
  int status;                       /* the MPI outcome, once ended */
  mca_coll_ibcoll_request_t* next;  /* in its module's queue, then in the running list */
  bool freed;                       /* MPI_Request_free while running: released when it ends */
  bool completed;                   /* handed back to Open MPI */
};

static OBJ_CLASS_INSTANCE(mca_coll_ibcoll_request_t, ompi_coll_base_nbc_request_t, NULL, NULL);

static mca_coll_ibcoll_request_t* running; /* started and not yet completed, by next; locked */
static unsigned live;                      /* made and not yet completed, queued ones too; locked */

static void release(mca_coll_ibcoll_request_t* r) {
  OMPI_REQUEST_FINI(&r->super.super);
  OBJ_RELEASE(r);
}

static int request_free(ompi_request_t** request) {
  mca_coll_ibcoll_request_t* r = (mca_coll_ibcoll_request_t*)*request;
  mca_coll_ibcoll_lock();
  const bool completed = r->completed;
  if (!completed) r->freed = true;
  mca_coll_ibcoll_unlock();
  if (completed) release(r);
  *request = MPI_REQUEST_NULL;
  return OMPI_SUCCESS;
}

static int request_cancel(ompi_request_t* request, int complete) {
  (void)request;
  (void)complete;
  return OMPI_SUCCESS; /* collectives cannot be cancelled; MPI_Cancel on one is erroneous */
}

/* An ended request waits in `running` for the progress callback to complete it. */
static void end(mca_coll_ibcoll_request_t* r, int status) {
  r->status = status;
  r->ibcoll = NULL;
  r->previous = NULL;
}

static bool ended(const mca_coll_ibcoll_request_t* r) {
  return !r->ibcoll && !r->previous;
}

/* Starts the call now: in ibcoll once mapped, else through the previous module. */
static void start(mca_coll_ibcoll_request_t* r) {
  mca_coll_ibcoll_module_t* m = r->module;
  const mca_coll_ibcoll_call_t* c = &r->call;
  int rc;
  if (m->mapping == IBCOLL_MAPPED) {
    const ibcoll_status_t s = c->bcast ? ibcoll_ibcast(c->recv, c->count, IBCOLL_UINT8, c->root,
                                                       m->ibcoll_comm, &r->ibcoll)
                                       : ibcoll_iallreduce(c->send, c->recv, c->count, c->type,
                                                           c->op, m->ibcoll_comm, &r->ibcoll);
    rc = mca_coll_ibcoll_outcome(s, c->bcast ? "MPI_Ibcast" : "MPI_Iallreduce", m->comm);
  } else {
    opal_output_verbose(10, mca_coll_ibcoll_component.output,
                        "coll:ibcoll: a queued call on %s: fallback", m->comm->c_name);
    mca_coll_ibcoll_counters_t* n = &mca_coll_ibcoll_component.counters;
    --*(c->bcast ? &n->ibcast : &n->iallreduce); /* under the lock */
    mca_coll_ibcoll_count_fallback();
    free(r->call.packed); /* the previous module takes the caller's own layout */
    r->call.packed = NULL;
    rc = c->bcast ? m->previous_ibcast(c->mpi_recv, c->mpi_count, c->mpi_type, c->root, m->comm,
                                       &r->previous, m->previous_ibcast_module)
                  : m->previous_iallreduce(c->mpi_send, c->mpi_recv, c->mpi_count, c->mpi_type,
                                           c->mpi_op, m->comm, &r->previous,
                                           m->previous_iallreduce_module);
  }
  if (rc != MPI_SUCCESS) end(r, rc);
  r->next = running;
  running = r;
}

int mca_coll_ibcoll_request_start(mca_coll_ibcoll_module_t* m, const mca_coll_ibcoll_call_t* call,
                                  ompi_request_t** out) {
  mca_coll_ibcoll_request_t* r = OBJ_NEW(mca_coll_ibcoll_request_t);
  if (!r) {
    free(call->packed);
    return MPI_ERR_NO_MEM;
  }
  OMPI_REQUEST_INIT(&r->super.super, false);
  r->super.super.req_type = OMPI_REQUEST_COLL;
  r->super.super.req_state = OMPI_REQUEST_ACTIVE;
  r->super.super.req_free = request_free;
  r->super.super.req_cancel = request_cancel;
  r->module = m;
  r->call = *call;
  r->ibcoll = NULL;
  r->previous = NULL;
  r->status = MPI_SUCCESS;
  r->next = NULL;
  r->freed = r->completed = false;
  /* MPI_Comm_free or MPI_Type_free meanwhile must not take them away. */
  OBJ_RETAIN(m->comm);
  OBJ_RETAIN(call->mpi_type);
  if (call->mpi_op) OBJ_RETAIN(call->mpi_op);
  *out = &r->super.super;
  ++live;
  if (m->mapping == IBCOLL_AGREEING || m->queued) {
    if (m->queued_last)
      m->queued_last->next = r;
    else
      m->queued = r;
    m->queued_last = r;
    return MPI_SUCCESS;
  }
  start(r);
  return MPI_SUCCESS;
}

void mca_coll_ibcoll_start_queued(mca_coll_ibcoll_module_t* m) {
  while (m->queued) {
    mca_coll_ibcoll_request_t* r = m->queued;
    m->queued = r->next;
    start(r);
  }
  m->queued_last = NULL;
}

bool mca_coll_ibcoll_requests_pending(void) {
  mca_coll_ibcoll_lock();
  const bool pending = live > 0;
  mca_coll_ibcoll_unlock();
  return pending;
}

/* Whether a running request has ended (moving it along first). Locked. */
static bool check(mca_coll_ibcoll_request_t* r) {
  if (r->ibcoll) {
    int done = 0;
    const ibcoll_status_t s = ibcoll_test(r->ibcoll, &done);
    if (!done) return false;
    ibcoll_request_free(&r->ibcoll);
    const mca_coll_ibcoll_call_t* c = &r->call;
    ompi_communicator_t* comm = r->module->comm;
    end(r, c->bcast ? mca_coll_ibcoll_bcast_outcome(c, s, "MPI_Ibcast", comm)
                    : mca_coll_ibcoll_outcome(s, "MPI_Iallreduce", comm));
  } else if (r->previous) {
    if (!REQUEST_COMPLETE(r->previous)) return false;
    const int status = r->previous->req_status.MPI_ERROR;
    ompi_request_free(&r->previous);
    end(r, status);
  }
  return true;
}

/* Hands an ended request back to Open MPI. Unlocked: completing it may run its callback. */
static void complete(mca_coll_ibcoll_request_t* r) {
  mca_coll_ibcoll_call_t* c = &r->call;
  ompi_communicator_t* comm = r->module->comm;
  if (r->status == MPI_SUCCESS)
    r->status = mca_coll_ibcoll_unpack(c, ompi_comm_rank(comm), "MPI_Ibcast", comm);
  free(c->packed);
  OBJ_RELEASE(c->mpi_type);
  if (c->mpi_op) OBJ_RELEASE(c->mpi_op);
  r->super.super.req_status.MPI_ERROR = r->status;
  mca_coll_ibcoll_lock();
  const bool freed = r->freed;
  r->completed = !freed;
  --live;
  mca_coll_ibcoll_unlock();
  /* Freed or not, it completes: that runs the callback Open MPI set on it (which lets go of
   * the datatypes it retained). Nobody waits for a freed one. */
  ompi_request_complete(&r->super.super, !freed);
  if (freed) release(r);
  OBJ_RELEASE(comm); /* may free the communicator, and with it the module */
}

/* From Open MPI's progress loop: maps communicators whose agreement ended, moves ibcoll along,
 * and completes the requests that ended. A thread already inside ibcoll holds the lock, and then
 * this returns at once. */
int mca_coll_ibcoll_progress(void) {
  enum { kBatch = 64 }; /* completed per call; more wait for the next */
  mca_coll_ibcoll_request_t* done[kBatch];
  size_t n = 0;
  if (!mca_coll_ibcoll_trylock()) return 0;
  mca_coll_ibcoll_inside_progress(true);
  mca_coll_ibcoll_settle_all();
  for (mca_coll_ibcoll_request_t** link = &running; *link && n < kBatch;) {
    mca_coll_ibcoll_request_t* r = *link;
    if (!ended(r) && !check(r)) {
      link = &r->next;
      continue;
    }
    *link = r->next;
    OBJ_RETAIN(r); /* alive until completed here, even if its owner frees it meanwhile */
    done[n++] = r;
  }
  mca_coll_ibcoll_inside_progress(false);
  mca_coll_ibcoll_unlock();
  for (size_t i = 0; i < n; ++i) {
    complete(done[i]);
    OBJ_RELEASE(done[i]);
  }
  return (int)n;
}
