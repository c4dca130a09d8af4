/* coll/ibcoll: Open MPI 4.1's collective framework handing MPI_Allreduce, MPI_Bcast,
 * MPI_Iallreduce and MPI_Ibcast on intracommunicators to ibcoll through its C API. Everything
 * ibcoll does not take (other datatypes and ops, intercommunicators, sizes above the
 * thresholds) goes to the module that was selected before this one, saved at enable.
 *
 * One ibcoll context per process, started when MPI_COMM_WORLD's module is enabled (bootstrap:
 * the world's saved allgather), stopped from a MPI_COMM_SELF attribute's delete callback, the
 * first thing MPI_Finalize does while everything still works. Each MPI communicator gets its
 * ibcoll communicator at its first call: the members agree on an id with the saved allreduce,
 * then map their ranks to world ranks (ibcoll_comm_from_ranks). ibcoll is not thread-safe: one
 * lock guards it; Open MPI's progress loop only tries the lock. */
#ifndef MCA_COLL_IBCOLL_H
#define MCA_COLL_IBCOLL_H

#include "ompi_config.h"

#include <stdbool.h>
#include <stddef.h>

#include "ibcoll/ibcoll.h"
#include "mpi.h"
#include "ompi/communicator/communicator.h"
#include "ompi/mca/coll/coll.h"

BEGIN_C_DECLS

/* What ibcoll ran and what fell back, printed at verbosity 1 when ibcoll stops. */
typedef struct {
  unsigned long allreduce, bcast, iallreduce, ibcast, fallback;
} mca_coll_ibcoll_counters_t;

typedef struct {
  mca_coll_base_component_2_0_0_t super;
  /* MCA parameters */
  int priority;
  int verbose;
  bool enable;
  size_t allreduce_max_bytes; /* 0: any size */
  size_t bcast_max_bytes;
  char* allreduce_algorithm; /* "" or auto: ibcoll's table */
  char* bcast_algorithm;
  /* state */
  int output;
  ibcoll_context_t context; /* NULL until MPI_COMM_WORLD's module is enabled */
  bool context_failed;      /* tried and failed: every module stays out */
  mca_coll_ibcoll_counters_t counters;
} mca_coll_ibcoll_component_t;

OMPI_MODULE_DECLSPEC extern mca_coll_ibcoll_component_t mca_coll_ibcoll_component;

/* A previous module's entry point and the module it belongs to (retained while saved). */
#define IBCOLL_SAVED(fn_type, name) \
  fn_type name;                     \
  mca_coll_base_module_t* name##_module

typedef struct {
  mca_coll_base_module_t super;
  ompi_communicator_t* comm;
  ibcoll_comm_t ibcoll_comm; /* made at the first call; the world's belongs to the context */
  bool unusable;             /* members from another job, or ibcoll refused: always fall back */
  IBCOLL_SAVED(mca_coll_base_module_allreduce_fn_t, previous_allreduce);
  IBCOLL_SAVED(mca_coll_base_module_bcast_fn_t, previous_bcast);
  IBCOLL_SAVED(mca_coll_base_module_iallreduce_fn_t, previous_iallreduce);
  IBCOLL_SAVED(mca_coll_base_module_ibcast_fn_t, previous_ibcast);
  IBCOLL_SAVED(mca_coll_base_module_allgather_fn_t, previous_allgather);
} mca_coll_ibcoll_module_t;
OBJ_CLASS_DECLARATION(mca_coll_ibcoll_module_t);

/* coll_ibcoll_module.c */
mca_coll_base_module_t* mca_coll_ibcoll_comm_query(ompi_communicator_t* comm, int* priority);
/* The module's ibcoll communicator, made at the first call; NULL: fall back. Call locked. */
ibcoll_comm_t mca_coll_ibcoll_comm_of(mca_coll_ibcoll_module_t* module);
/* Frees the module's ibcoll communicator (before the context stops). Call locked. */
void mca_coll_ibcoll_forget_comm(mca_coll_ibcoll_module_t* module);

/* coll_ibcoll_context.c */
/* Starts the process's ibcoll context over MPI_COMM_WORLD (its module, enabled). */
int mca_coll_ibcoll_start(mca_coll_ibcoll_module_t* world);
void mca_coll_ibcoll_lock(void);
bool mca_coll_ibcoll_trylock(void);
void mca_coll_ibcoll_unlock(void);
/* Remembers a module whose ibcoll communicator must go before the context does. */
void mca_coll_ibcoll_track(mca_coll_ibcoll_module_t* module);
void mca_coll_ibcoll_untrack(mca_coll_ibcoll_module_t* module);

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
/* Completes the MPI requests whose ibcoll requests have ended; from Open MPI's progress loop. */
int mca_coll_ibcoll_progress(void);
/* Whether requests are still running (the context must not stop under them). */
bool mca_coll_ibcoll_requests_pending(void);
/* Drops the (empty) list of running requests, when the context stops. Call locked. */
void mca_coll_ibcoll_forget_requests(void);

END_C_DECLS

#endif
