/* coll/ibcoll: Open MPI 4.1's collective framework handing MPI_Allreduce, MPI_Bcast,
 * MPI_Iallreduce and MPI_Ibcast on intracommunicators to ibcoll through its C API. Everything
 * ibcoll does not take (other datatypes and ops, intercommunicators, sizes above the
 * thresholds) goes to the module that was selected before this one, saved at enable.
 *
 * One ibcoll context per process, started when MPI_COMM_WORLD's module is enabled (bootstrap:
 * the world's saved allgather), stopped from a MPI_COMM_SELF attribute's delete callback, the
 * first thing MPI_Finalize does while everything still works.
 *
 * Each MPI communicator gets its ibcoll communicator at its first call, without blocking: the
 * members agree on an id in rounds of messages of their own (coll_ibcoll_round.c), and the calls
 * made meanwhile wait in the module's queue, started in call order once it is mapped
 * (coll_ibcoll_module.c).
 *
 * Threads (MPI_THREAD_MULTIPLE): ibcoll is not thread-safe, so one lock guards every call into
 * it and the component's shared state. Under the lock the component never calls anything of
 * Open MPI's that may block or come back into the component; ibcoll's waits release it around
 * opal_progress, so other threads (and Open MPI's progress callbacks, which may start
 * collectives) get their turn. Open MPI's progress loop only tries the lock. Below
 * MPI_THREAD_MULTIPLE one thread at a time is in MPI, so the lock is a flag: it keeps what the
 * lock says (held or not) without a mutex's atomic operations on every call. */
#ifndef MCA_COLL_IBCOLL_H
#define MCA_COLL_IBCOLL_H

#include "ompi_config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ibcoll/ibcoll.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"
#include "ompi/request/request.h"

BEGIN_C_DECLS

/* What ibcoll ran and what fell back, printed at verbosity 1 when ibcoll stops. What ibcoll ran
 * is counted under the lock (a plain add: every call pays for it); what fell back, from any
 * thread without it (mca_coll_ibcoll_count_fallback). */
typedef struct {
  unsigned long allreduce, bcast, iallreduce, ibcast, fallback;
} mca_coll_ibcoll_counters_t;

typedef struct {
  mca_coll_base_component_2_0_0_t super;
  /* MCA parameters */
  int priority; /* 0 or below: the component offers no module */
  int verbose;
  bool enable;
  size_t allreduce_max_bytes; /* 0: any size */
  size_t bcast_max_bytes;
  char* allreduce_algorithm; /* "" or auto: ibcoll's table */
  char* bcast_algorithm;
  char* timeout; /* "": IBCOLL_TIMEOUT as it is */
  /* state */
  int output;
  ibcoll_context_t context; /* NULL until MPI_COMM_WORLD's module is enabled */
  bool context_failed;      /* tried and failed: every module stays out */
  mca_coll_ibcoll_counters_t counters;
} mca_coll_ibcoll_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_ibcoll_component_t mca_coll_ibcoll_component;

static inline void mca_coll_ibcoll_count_fallback(void) {
  __atomic_fetch_add(&mca_coll_ibcoll_component.counters.fallback, 1, __ATOMIC_RELAXED);
}

/* A previous module's entry point and the module it belongs to (retained while saved). */
#define IBCOLL_SAVED(fn_type, name) \
  fn_type name;                     \
  mca_coll_base_module_t* name##_module

/* Where a module's communicator stands with ibcoll. */
typedef enum {
  IBCOLL_UNMAPPED, /* no call yet */
  IBCOLL_AGREEING, /* the members' id agreement is running; calls wait in the queue */
  IBCOLL_MAPPED,   /* ibcoll_comm serves it */
  IBCOLL_UNUSABLE  /* members from another job, or ibcoll refused it: every call falls back */
} mca_coll_ibcoll_mapping_t;

typedef struct mca_coll_ibcoll_request_t mca_coll_ibcoll_request_t;

/* One round of the id agreement (coll_ibcoll_round.c): the members' maximum of these values,
 * each rank's vote. */
enum {
  IBCOLL_ROUND_REJECTED, /* this rank could not take the id the last round chose */
  IBCOLL_ROUND_OFFER,    /* the lowest id this rank offers */
  IBCOLL_ROUND_BROKEN,   /* a message of the round failed */
  IBCOLL_ROUND_STAMP,    /* this rank's stamp (ibcoll_comm_stamp) */
  IBCOLL_ROUND_VALUES,
  IBCOLL_ROUND_MAX_CHILDREN = 31 /* in the binomial tree, for any int communicator size */
};
typedef struct {
  int64_t value[IBCOLL_ROUND_VALUES]; /* this rank's vote, then its subtree's maximum */
  int64_t total[IBCOLL_ROUND_VALUES]; /* the members' maximum, once the round has ended */
  int64_t from_child[IBCOLL_ROUND_MAX_CHILDREN][IBCOLL_ROUND_VALUES];
  ompi_request_t* receives[IBCOLL_ROUND_MAX_CHILDREN];
  ompi_request_t* sends[IBCOLL_ROUND_MAX_CHILDREN];
  ompi_request_t *to_parent, *from_parent;
  int child[IBCOLL_ROUND_MAX_CHILDREN], children, parent; /* parent -1 at rank 0 */
  int phase;
  bool failed;
} mca_coll_ibcoll_round_t;

typedef struct mca_coll_ibcoll_module_t {
  mca_coll_base_module_t super;
  ompi_communicator_t* comm;
  mca_coll_ibcoll_mapping_t mapping;
  ibcoll_comm_t ibcoll_comm; /* once mapped; the world's belongs to the context */
  /* The id agreement (coll_ibcoll_module.c), while it runs: its round, how many have run, and
   * the id this rank offers in it. */
  mca_coll_ibcoll_round_t* round;
  unsigned rounds, offer;
  int* world_ranks;    /* the members (none while a mapped communicator has the same) */
  bool shares_members; /* its ibcoll communicator was made like another's (ibcoll_comm_like) */
  mca_coll_ibcoll_request_t *queued, *queued_last; /* calls waiting for the mapping, in order */
  struct mca_coll_ibcoll_module_t* next_agreeing;  /* in the list of modules agreeing */
  struct mca_coll_ibcoll_module_t* next_tracked;   /* in the list of modules of the context */
  IBCOLL_SAVED(mca_coll_base_module_allreduce_fn_t, previous_allreduce);
  IBCOLL_SAVED(mca_coll_base_module_bcast_fn_t, previous_bcast);
  IBCOLL_SAVED(mca_coll_base_module_iallreduce_fn_t, previous_iallreduce);
  IBCOLL_SAVED(mca_coll_base_module_ibcast_fn_t, previous_ibcast);
  IBCOLL_SAVED(mca_coll_base_module_allgather_fn_t, previous_allgather);
} mca_coll_ibcoll_module_t;
OBJ_CLASS_DECLARATION(mca_coll_ibcoll_module_t);

/* One call as ibcoll runs it, with the MPI arguments it came from (for the previous module,
 * should the communicator turn out unusable while the call waits for its mapping). A bcast
 * moves `bytes` bytes; `packed`, when not NULL, holds them because the datatype's layout is
 * not contiguous (the root packed them; elsewhere they are unpacked at the end). */
typedef struct {
  bool bcast;
  const void* send; /* allreduce */
  void* recv;       /* allreduce: the result; bcast: where the bytes are */
  size_t count;     /* allreduce: elements; bcast: bytes */
  ibcoll_datatype_t type;
  ibcoll_op_t op;
  void* packed;
  /* No memory here to pack into: the call joins as an empty bcast, so the call check fails it on
   * every rank (as ranks that disagree fail together) rather than leave them waiting; it ends
   * with MPI_ERR_NO_MEM here. */
  bool unpackable;
  /* as MPI passed them */
  const void* mpi_send;
  void* mpi_recv;
  int mpi_count;
  struct ompi_datatype_t* mpi_type;
  struct ompi_op_t* mpi_op;
  int root;
} mca_coll_ibcoll_call_t;

/* coll_ibcoll_module.c */
mca_coll_base_module_t* mca_coll_ibcoll_comm_query(ompi_communicator_t* comm, int* priority);
/* Moves the module's mapping on as far as it can without waiting: starts the id agreement at
 * the first call, maps once it has ended, and starts the queued calls. Call locked. */
void mca_coll_ibcoll_settle(mca_coll_ibcoll_module_t* module);
/* Settles every module whose agreement runs (from the progress callback). Call locked. */
void mca_coll_ibcoll_settle_all(void);
/* Frees the module's ibcoll communicator (before the context stops). Call locked. */
void mca_coll_ibcoll_forget_comm(mca_coll_ibcoll_module_t* module);

/* coll_ibcoll_round.c */
/* Starts a round with this rank's vote. A message that cannot be posted marks it broken. */
void mca_coll_ibcoll_round_start(mca_coll_ibcoll_round_t* round, ompi_communicator_t* comm,
                                 const int64_t vote[IBCOLL_ROUND_VALUES]);
/* Moves the round on without waiting; true once it has ended (round->total holds the result)
 * and nothing of it is pending any more. */
bool mca_coll_ibcoll_round_test(mca_coll_ibcoll_round_t* round, ompi_communicator_t* comm);

/* coll_ibcoll_context.c */
/* Starts the process's ibcoll context over MPI_COMM_WORLD (its module, enabled). */
int mca_coll_ibcoll_start(mca_coll_ibcoll_module_t* world);
/* Whether threads call MPI at once (MPI_THREAD_MULTIPLE): the lock is then a mutex. Set once,
 * before any call. */
void mca_coll_ibcoll_threads_at_once(bool at_once);
/* The lock: a mutex when threads call at once, else a flag that keeps what the mutex would say
 * (for the progress callback's try). Inline: every call takes it. */
typedef struct {
  pthread_mutex_t mutex;
  bool threads_at_once; /* until Open MPI says otherwise */
  bool held;            /* the flag, while one thread at a time calls */
} mca_coll_ibcoll_lock_t;
extern mca_coll_ibcoll_lock_t mca_coll_ibcoll_the_lock;
static inline void mca_coll_ibcoll_lock(void) {
  if (mca_coll_ibcoll_the_lock.threads_at_once) {
    pthread_mutex_lock(&mca_coll_ibcoll_the_lock.mutex);
  } else {
    mca_coll_ibcoll_the_lock.held = true;
  }
}
static inline void mca_coll_ibcoll_unlock(void) {
  if (mca_coll_ibcoll_the_lock.threads_at_once) {
    pthread_mutex_unlock(&mca_coll_ibcoll_the_lock.mutex);
  } else {
    mca_coll_ibcoll_the_lock.held = false;
  }
}
bool mca_coll_ibcoll_trylock(void);
/* While set on a thread (the progress callback), ibcoll's waits there do not run
 * opal_progress: it is already running below. */
void mca_coll_ibcoll_inside_progress(bool inside);
/* Remembers a module whose ibcoll communicator must go before the context does. */
void mca_coll_ibcoll_track(mca_coll_ibcoll_module_t* module);
void mca_coll_ibcoll_untrack(mca_coll_ibcoll_module_t* module);
/* The ibcoll communicator of a mapped module of the same MPI group as m's (a duplicate's
 * parent, or a sibling), or NULL: the members' list ibcoll_comm_like shares. Locked. */
ibcoll_comm_t mca_coll_ibcoll_same_members(const mca_coll_ibcoll_module_t* m);

/* coll_ibcoll_collectives.c */
int mca_coll_ibcoll_allreduce(const void* sbuf, void* rbuf, int count,
                              struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                              struct ompi_communicator_t* comm, mca_coll_base_module_t* module);
int mca_coll_ibcoll_bcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                          struct ompi_communicator_t* comm, mca_coll_base_module_t* module);
int mca_coll_ibcoll_iallreduce(const void* sbuf, void* rbuf, int count,
                               struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                               struct ompi_communicator_t* comm, ompi_request_t** request,
                               mca_coll_base_module_t* module);
int mca_coll_ibcoll_ibcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                           struct ompi_communicator_t* comm, ompi_request_t** request,
                           mca_coll_base_module_t* module);
/* The message of a failed call, before the communicator's error handler runs; the MPI error. */
int mca_coll_ibcoll_outcome(ibcoll_status_t status, const char* call, ompi_communicator_t* comm);
/* A bcast's outcome for `status` from ibcoll: as mca_coll_ibcoll_outcome, but MPI_ERR_NO_MEM
 * (said) for an unpackable call. */
int mca_coll_ibcoll_bcast_outcome(const mca_coll_ibcoll_call_t* call, ibcoll_status_t status,
                                  const char* name, ompi_communicator_t* comm);
/* A bcast that went well, its bytes back into the caller's layout where they were packed (not at
 * the root): MPI_SUCCESS, or MPI_ERR_INTERN (said) when the convertor fails. Call unlocked: it
 * copies the whole message. */
int mca_coll_ibcoll_unpack(const mca_coll_ibcoll_call_t* call, int rank, const char* name,
                           ompi_communicator_t* comm);

/* coll_ibcoll_request.c */
/* A non-blocking call through ibcoll as an Open MPI request in *out: started now when the
 * module is mapped and nothing waits before it, else queued. The request owns call->packed.
 * Call locked. */
int mca_coll_ibcoll_request_start(mca_coll_ibcoll_module_t* module,
                                  const mca_coll_ibcoll_call_t* call, ompi_request_t** out);
/* Starts the module's queued calls, in order, now that it is mapped (or unusable: then through
 * the previous module). Call locked. */
void mca_coll_ibcoll_start_queued(mca_coll_ibcoll_module_t* module);
/* Completes the Open MPI requests whose calls have ended; from Open MPI's progress loop. */
int mca_coll_ibcoll_progress(void);
/* Whether requests are still running (the context must not stop under them). */
bool mca_coll_ibcoll_requests_pending(void);

END_C_DECLS

#endif
