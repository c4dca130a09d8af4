/* A module per communicator: what it saves at enable (the previous providers, for fallback)
 * and its ibcoll communicator, made at the first call. */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_ibcoll.h"
#include "ompi/proc/proc.h"
#include "opal/util/output.h"

static void module_construct(mca_coll_ibcoll_module_t* m) {
  /* Everything after the base module starts empty: no communicator, nothing saved. */
  memset((char*)m + sizeof(m->super), 0, sizeof(*m) - sizeof(m->super));
}

static void module_destruct(mca_coll_ibcoll_module_t* m) {
  mca_coll_ibcoll_lock();
  mca_coll_ibcoll_forget_comm(m);
  mca_coll_ibcoll_untrack(m);
  mca_coll_ibcoll_unlock();
  mca_coll_base_module_t* saved[] = {m->previous_allreduce_module, m->previous_bcast_module,
                                     m->previous_iallreduce_module, m->previous_ibcast_module,
                                     m->previous_allgather_module};
  for (size_t i = 0; i < sizeof(saved) / sizeof(saved[0]); ++i) {
    if (saved[i]) OBJ_RELEASE(saved[i]);
  }
}

OBJ_CLASS_INSTANCE(mca_coll_ibcoll_module_t, mca_coll_base_module_t, module_construct,
                   module_destruct);

/* The providers below us, kept for what ibcoll does not take. The base releases a slot's old
 * module when we take the slot, so each one saved is retained here. */
#define SAVE_PREVIOUS(m, comm, name)                                      \
  do {                                                                    \
    (m)->previous_##name = (comm)->c_coll->coll_##name;                   \
    (m)->previous_##name##_module = (comm)->c_coll->coll_##name##_module; \
    if (!(m)->previous_##name || !(m)->previous_##name##_module) {        \
      return OMPI_ERROR; /* nothing to fall back on: stay out */          \
    }                                                                     \
    OBJ_RETAIN((m)->previous_##name##_module);                            \
  } while (0)

static int module_enable(mca_coll_base_module_t* module, ompi_communicator_t* comm) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  SAVE_PREVIOUS(m, comm, allreduce);
  SAVE_PREVIOUS(m, comm, bcast);
  SAVE_PREVIOUS(m, comm, iallreduce);
  SAVE_PREVIOUS(m, comm, ibcast);
  SAVE_PREVIOUS(m, comm, allgather);
  m->comm = comm;
  if (comm == &ompi_mpi_comm_world.comm && !mca_coll_ibcoll_component.context) {
    if (mca_coll_ibcoll_start(m) != OMPI_SUCCESS) return OMPI_ERROR;
  }
  if (!mca_coll_ibcoll_component.context) return OMPI_ERROR;
  mca_coll_ibcoll_lock();
  mca_coll_ibcoll_track(m);
  mca_coll_ibcoll_unlock();
  return OMPI_SUCCESS;
}

mca_coll_base_module_t* mca_coll_ibcoll_comm_query(ompi_communicator_t* comm, int* priority) {
  const mca_coll_ibcoll_component_t* c = &mca_coll_ibcoll_component;
  if (!c->enable || c->context_failed || OMPI_COMM_IS_INTER(comm) || ompi_comm_size(comm) < 2) {
    return NULL;
  }
  mca_coll_ibcoll_module_t* m = OBJ_NEW(mca_coll_ibcoll_module_t);
  if (!m) return NULL;
  m->super.coll_module_enable = module_enable;
  m->super.coll_allreduce = mca_coll_ibcoll_allreduce;
  m->super.coll_bcast = mca_coll_ibcoll_bcast;
  m->super.coll_iallreduce = mca_coll_ibcoll_iallreduce;
  m->super.coll_ibcast = mca_coll_ibcoll_ibcast;
  *priority = c->priority;
  return &m->super;
}

/* The members agree, with the saved allreduce, on the largest next free ibcoll id and on
 * whether any of them belongs to another job (spawned or connected: not in ibcoll's world). */
static void map_to_ibcoll(mca_coll_ibcoll_module_t* m) {
  ompi_communicator_t* comm = m->comm;
  const int n = ompi_comm_size(comm);
  const opal_jobid_t job = ompi_proc_local()->super.proc_name.jobid;
  int* world_ranks = malloc((size_t)n * sizeof(int));
  if (!world_ranks) return;
  int64_t mine[2] = {0, 0}, agreed[2] = {0, 0};
  for (int r = 0; r < n; ++r) {
    const ompi_proc_t* proc = ompi_comm_peer_lookup(comm, r);
    world_ranks[r] = (int)proc->super.proc_name.vpid;
    if (proc->super.proc_name.jobid != job) mine[1] = 1;
  }
  unsigned next = 0;
  ibcoll_comm_next_id(mca_coll_ibcoll_component.context, &next);
  mine[0] = next;
  const int rc = m->previous_allreduce(mine, agreed, 2, MPI_INT64_T, MPI_MAX, comm,
                                       m->previous_allreduce_module);
  if (rc == OMPI_SUCCESS && agreed[1] == 0 &&
      ibcoll_comm_from_ranks(mca_coll_ibcoll_component.context, world_ranks, n, (unsigned)agreed[0],
                             &m->ibcoll_comm) != IBCOLL_SUCCESS) {
    opal_output(0, "coll:ibcoll: %s: %s; MPI's own collectives serve it", comm->c_name,
                ibcoll_last_error());
  }
  free(world_ranks);
}

ibcoll_comm_t mca_coll_ibcoll_comm_of(mca_coll_ibcoll_module_t* m) {
  if (m->ibcoll_comm || m->unusable) return m->ibcoll_comm;
  ibcoll_context_t context = mca_coll_ibcoll_component.context;
  if (!context) {
    m->unusable = true;
  } else if (m->comm == &ompi_mpi_comm_world.comm) {
    ibcoll_comm_world(context, &m->ibcoll_comm);
  } else {
    map_to_ibcoll(m);
    m->unusable = !m->ibcoll_comm;
  }
  return m->ibcoll_comm;
}

void mca_coll_ibcoll_forget_comm(mca_coll_ibcoll_module_t* m) {
  if (m->ibcoll_comm && m->comm != &ompi_mpi_comm_world.comm) ibcoll_comm_free(&m->ibcoll_comm);
  m->ibcoll_comm = NULL;
  m->unusable = true;
}
