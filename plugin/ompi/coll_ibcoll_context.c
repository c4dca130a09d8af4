/* The process's ibcoll context: started over MPI_COMM_WORLD, stopped first thing in
 * MPI_Finalize (a MPI_COMM_SELF attribute's delete callback, while the world's collectives
 * still work), guarded by one lock. */
#include "ompi_config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "coll_ibcoll.h"
#include "ompi/attribute/attribute.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

mca_coll_ibcoll_lock_t mca_coll_ibcoll_the_lock = {.mutex = PTHREAD_MUTEX_INITIALIZER,
                                                   .threads_at_once = true};
static mca_coll_ibcoll_module_t* tracked; /* modules that may hold an ibcoll communicator */
static int finalize_keyval = MPI_KEYVAL_INVALID;
static __thread bool inside_progress; /* this thread runs the progress callback */

void mca_coll_ibcoll_threads_at_once(bool at_once) {
  mca_coll_ibcoll_the_lock.threads_at_once = at_once;
}
bool mca_coll_ibcoll_trylock(void) {
  mca_coll_ibcoll_lock_t* lock = &mca_coll_ibcoll_the_lock;
  if (lock->threads_at_once) return pthread_mutex_trylock(&lock->mutex) == 0;
  if (lock->held) return false;
  lock->held = true;
  return true;
}
void mca_coll_ibcoll_inside_progress(bool inside) {
  inside_progress = inside;
}

void mca_coll_ibcoll_track(mca_coll_ibcoll_module_t* module) {
  module->next_tracked = tracked;
  tracked = module;
}

void mca_coll_ibcoll_untrack(mca_coll_ibcoll_module_t* module) {
  for (mca_coll_ibcoll_module_t** link = &tracked; *link; link = &(*link)->next_tracked) {
    if (*link == module) {
      *link = module->next_tracked;
      return;
    }
  }
}

ibcoll_comm_t mca_coll_ibcoll_same_members(const mca_coll_ibcoll_module_t* m) {
  for (const mca_coll_ibcoll_module_t* t = tracked; t; t = t->next_tracked) {
    if (t != m && t->mapping == IBCOLL_MAPPED && t->ibcoll_comm &&
        t->comm->c_local_group == m->comm->c_local_group) {
      return t->ibcoll_comm;
    }
  }
  return NULL;
}

/* ibcoll's set-up and finalize exchanges, over the world's saved allgather. */
static int world_allgather(const void* mine, void* all, size_t bytes, void* state) {
  mca_coll_ibcoll_module_t* world = state;
  if (bytes > (size_t)INT_MAX) return -1;
  return world->previous_allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE,
                                   world->comm, world->previous_allgather_module) == OMPI_SUCCESS
             ? 0
             : -1;
}

/* Inside ibcoll's waits Open MPI's own traffic keeps moving (a peer may need it to reach the
 * collective we wait in), but only every so many of ibcoll's polls: a round of opal_progress
 * (UCX's worker over verbs, say) costs far more than one of ibcoll's and would set its pace.
 * The lock is let go meanwhile: opal_progress may start collectives (a context id allocation
 * does), and other threads take their turn in ibcoll. Within the progress callback it is not
 * run at all: opal_progress is running already, further down the stack. */
static int run_opal_progress(void* state) {
  enum { kPollsPerOpalProgress = 64 };
  static unsigned polls; /* under the component's lock */
  (void)state;
  if (inside_progress || ++polls % kPollsPerOpalProgress != 0) return 0;
  mca_coll_ibcoll_unlock();
  opal_progress();
  mca_coll_ibcoll_lock();
  return 0; /* events it handled are not counted: ibcoll's own polls decide when to yield */
}

/* Duplicates of MPI_COMM_SELF do not inherit the finalize hook. */
static int do_not_copy(MPI_Comm comm, int keyval, void* extra, void* attribute_in,
                       void* attribute_out, int* copy, MPI_Comm new_comm) {
  (void)comm;
  (void)keyval;
  (void)extra;
  (void)attribute_in;
  (void)attribute_out;
  (void)new_comm;
  *copy = 0;
  return OMPI_SUCCESS;
}

static void report_counters(void) {
  const mca_coll_ibcoll_counters_t* n = &mca_coll_ibcoll_component.counters;
  opal_output_verbose(1, mca_coll_ibcoll_component.output,
                      "coll:ibcoll: rank %d ran %lu allreduce, %lu bcast, %lu iallreduce, %lu "
                      "ibcast; %lu calls fell back",
                      ompi_comm_rank(&ompi_mpi_comm_world.comm), n->allreduce, n->bcast,
                      n->iallreduce, n->ibcast, n->fallback);
}

static int stop_at_finalize(MPI_Comm comm, int keyval, void* attribute, void* extra) {
  (void)comm;
  (void)keyval;
  (void)attribute;
  (void)extra;
  mca_coll_ibcoll_component_t* c = &mca_coll_ibcoll_component;
  while (mca_coll_ibcoll_requests_pending()) /* freed by their owner while running */
    opal_progress();
  mca_coll_ibcoll_lock();
  for (mca_coll_ibcoll_module_t* m = tracked; m; m = m->next_tracked)
    mca_coll_ibcoll_forget_comm(m);
  tracked = NULL;
  opal_progress_unregister(mca_coll_ibcoll_progress);
  report_counters();
  ibcoll_context_t context = c->context;
  c->context = NULL;
  mca_coll_ibcoll_unlock();
  /* Its last barrier goes through Open MPI's allgather: not under the lock. */
  if (ibcoll_finalize(context) != IBCOLL_SUCCESS) {
    opal_output(0, "coll:ibcoll: finalize: %s", ibcoll_last_error());
  }
  ompi_attr_free_keyval(COMM_ATTR, &finalize_keyval, false);
  return OMPI_SUCCESS;
}

/* An MCA parameter set (not empty, not `unset`) sets its IBCOLL_* variable. */
static void set_from_parameter(const char* variable, const char* value, const char* unset) {
  if (value && value[0] && strcmp(value, unset) != 0) setenv(variable, value, 1);
}

int mca_coll_ibcoll_start(mca_coll_ibcoll_module_t* world) {
  mca_coll_ibcoll_component_t* c = &mca_coll_ibcoll_component;
  set_from_parameter("IBCOLL_ALLREDUCE_ALGO", c->allreduce_algorithm, "auto");
  set_from_parameter("IBCOLL_BCAST_ALGO", c->bcast_algorithm, "auto");
  set_from_parameter("IBCOLL_TIMEOUT", c->timeout, "");
  const ibcoll_bootstrap_t bootstrap = {ompi_comm_rank(world->comm), ompi_comm_size(world->comm),
                                        world_allgather, world};
  if (ibcoll_init_with(&bootstrap, &c->context) != IBCOLL_SUCCESS) {
    opal_output(0, "coll:ibcoll: ibcoll did not start (%s); MPI's own collectives run instead",
                ibcoll_last_error());
    c->context_failed = true;
    c->context = NULL;
    return OMPI_ERROR;
  }
  ibcoll_set_external_progress(c->context, run_opal_progress, NULL);
  opal_progress_register(mca_coll_ibcoll_progress);
  ompi_attribute_fn_ptr_union_t copy, del;
  copy.attr_communicator_copy_fn = do_not_copy;
  del.attr_communicator_delete_fn = stop_at_finalize;
  if (ompi_attr_create_keyval(COMM_ATTR, copy, del, &finalize_keyval, NULL, 0, NULL) !=
          OMPI_SUCCESS ||
      ompi_attr_set_c(COMM_ATTR, &ompi_mpi_comm_self.comm, &ompi_mpi_comm_self.comm.c_keyhash,
                      finalize_keyval, NULL, false) != OMPI_SUCCESS) {
    opal_output(0, "coll:ibcoll: cannot hook MPI_Finalize; not using ibcoll");
    opal_progress_unregister(mca_coll_ibcoll_progress);
    ibcoll_finalize(c->context);
    c->context = NULL;
    c->context_failed = true;
    return OMPI_ERROR;
  }
  ibcoll_comm_t everyone = NULL;
  ibcoll_comm_world(c->context, &everyone);
  const int rank = ompi_comm_rank(world->comm), next = (rank + 1) % ompi_comm_size(world->comm);
  const char* timeout = getenv("IBCOLL_TIMEOUT");
  opal_output_verbose(
      10, c->output, "coll:ibcoll: rank %d started ibcoll: %s to rank %d; IBCOLL_TIMEOUT %s; %s",
      rank, ibcoll_transport(everyone, next), next, timeout ? timeout : "(default)",
      mca_coll_ibcoll_the_lock.threads_at_once ? "calls serialised by a mutex (MPI_THREAD_MULTIPLE)"
                                               : "one thread calls at a time (no mutex)");
  return OMPI_SUCCESS;
}
