/* A module per communicator: what it saves at enable (the previous providers, for fallback)
 * and its ibcoll communicator, mapped at the first call without blocking. */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_ibcoll.h"
#include "ompi/proc/proc.h"
#include "opal/util/output.h"

/* Modules whose id agreement runs (linked by next_agreeing): the progress callback maps them
 * when it ends. Locked. */
static mca_coll_ibcoll_module_t* agreeing;

static void module_construct(mca_coll_ibcoll_module_t* m) {
  /* Everything after the base module starts empty: unmapped, nothing saved. */
  memset((char*)m + sizeof(m->super), 0, sizeof(*m) - sizeof(m->super));
  m->mapping = IBCOLL_UNMAPPED;
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
  if (!c->enable || c->priority <= 0 || c->context_failed || OMPI_COMM_IS_INTER(comm) ||
      ompi_comm_size(comm) < 2) {
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

/* The members' world ranks (NULL, with *foreign set, if any belongs to another job: spawned or
 * connected processes are not in ibcoll's world). Every member computes the same answer. */
static int* world_ranks_of(ompi_communicator_t* comm, bool* foreign) {
  const int n = ompi_comm_size(comm);
  const opal_jobid_t job = ompi_proc_local()->super.proc_name.jobid;
  int* ranks = malloc((size_t)n * sizeof(int));
  *foreign = false;
  if (!ranks) return NULL;
  for (int r = 0; r < n && !*foreign; ++r) {
    const ompi_proc_t* proc = ompi_comm_peer_lookup(comm, r);
    ranks[r] = (int)proc->super.proc_name.vpid;
    *foreign = proc->super.proc_name.jobid != job;
  }
  if (*foreign) {
    free(ranks);
    return NULL;
  }
  return ranks;
}

static void unusable(mca_coll_ibcoll_module_t* m, const char* why) {
  opal_output_verbose(10, mca_coll_ibcoll_component.output,
                      "coll:ibcoll: %s: %s; MPI's own collectives serve it", m->comm->c_name, why);
  m->mapping = IBCOLL_UNUSABLE;
}

/* The id agreement goes in rounds, each one the saved non-blocking allreduce (MAX) of two
 * numbers per member: whether its claim failed (0 in the first round), and its next free id.
 * After a round every member tries to claim the largest next free id, by making the ibcoll
 * communicator with it at once (so that another agreement running on this rank meanwhile
 * cannot get the same id). The next round says whether every member could; if one could not,
 * those that did free theirs and all try the new largest next free id. Every member sees the
 * same tallies, hence reaches the same outcome. Non-blocking, so that it may start inside Open
 * MPI's progress (where a context id allocation starts its collectives) and under the lock. */
static bool start_round(mca_coll_ibcoll_module_t* m, bool claim_failed) {
  unsigned next = 0;
  ibcoll_comm_next_id(mca_coll_ibcoll_component.context, &next);
  m->vote[0] = claim_failed;
  m->vote[1] = next;
  return m->previous_iallreduce(m->vote, m->tally, 2, MPI_INT64_T, MPI_MAX, m->comm, &m->agreement,
                                m->previous_iallreduce_module) == OMPI_SUCCESS;
}

static void stop_agreeing(mca_coll_ibcoll_module_t* m) {
  for (mca_coll_ibcoll_module_t** link = &agreeing; *link; link = &(*link)->next_agreeing) {
    if (*link == m) {
      *link = m->next_agreeing;
      break;
    }
  }
  free(m->world_ranks);
  m->world_ranks = NULL;
}

/* The first call: the world is ibcoll's world; any other communicator's members start agreeing
 * on an id. */
static void begin_mapping(mca_coll_ibcoll_module_t* m) {
  ibcoll_context_t context = mca_coll_ibcoll_component.context;
  if (!context) {
    unusable(m, "ibcoll has stopped");
    return;
  }
  if (m->comm == &ompi_mpi_comm_world.comm) {
    ibcoll_comm_world(context, &m->ibcoll_comm);
    m->mapping = IBCOLL_MAPPED;
    return;
  }
  bool foreign = false;
  m->world_ranks = world_ranks_of(m->comm, &foreign);
  if (!m->world_ranks) {
    unusable(m, foreign ? "a member belongs to another job" : "out of memory");
    return;
  }
  m->mapping = IBCOLL_AGREEING;
  m->next_agreeing = agreeing;
  agreeing = m;
  if (!start_round(m, false)) {
    /* The other members wait in the agreement: say so loudly. */
    opal_output(0, "coll:ibcoll: %s: cannot start the id agreement", m->comm->c_name);
    stop_agreeing(m);
    unusable(m, "the id agreement did not start");
  }
}

/* A round has ended: done, or claim the largest next free id and start the next round. */
static void next_round(mca_coll_ibcoll_module_t* m) {
  const int status = m->agreement->req_status.MPI_ERROR;
  ompi_request_free(&m->agreement);
  m->agreement = NULL;
  const bool failed = status != MPI_SUCCESS || m->tally[1] > UINT16_MAX;
  /* Holding a claim (not in the first round) and nobody failed to claim: done. */
  if (failed || (m->ibcoll_comm && m->tally[0] == 0)) {
    stop_agreeing(m);
    if (failed) {
      if (m->ibcoll_comm) ibcoll_comm_free(&m->ibcoll_comm);
      unusable(m, status != MPI_SUCCESS ? "the id agreement failed" : "no ibcoll id is left");
    } else {
      m->mapping = IBCOLL_MAPPED;
    }
    return;
  }
  if (m->ibcoll_comm) ibcoll_comm_free(&m->ibcoll_comm); /* another member could not claim */
  const bool claimed = ibcoll_comm_from_ranks(mca_coll_ibcoll_component.context, m->world_ranks,
                                              ompi_comm_size(m->comm), (unsigned)m->tally[1],
                                              &m->ibcoll_comm) == IBCOLL_SUCCESS;
  if (!start_round(m, !claimed)) {
    opal_output(0, "coll:ibcoll: %s: cannot go on with the id agreement", m->comm->c_name);
    stop_agreeing(m);
    if (m->ibcoll_comm) ibcoll_comm_free(&m->ibcoll_comm);
    unusable(m, "the id agreement stopped");
  }
}

void mca_coll_ibcoll_settle(mca_coll_ibcoll_module_t* m) {
  if (m->mapping == IBCOLL_UNMAPPED) begin_mapping(m);
  while (m->mapping == IBCOLL_AGREEING) {
    if (!REQUEST_COMPLETE(m->agreement)) return;
    next_round(m);
  }
  if (m->queued) mca_coll_ibcoll_start_queued(m);
}

void mca_coll_ibcoll_settle_all(void) {
  for (mca_coll_ibcoll_module_t *m = agreeing, *next; m; m = next) {
    next = m->next_agreeing; /* settling may take m off the list */
    mca_coll_ibcoll_settle(m);
  }
}

void mca_coll_ibcoll_forget_comm(mca_coll_ibcoll_module_t* m) {
  if (m->ibcoll_comm && m->comm != &ompi_mpi_comm_world.comm) ibcoll_comm_free(&m->ibcoll_comm);
  m->ibcoll_comm = NULL;
  if (m->mapping != IBCOLL_AGREEING) m->mapping = IBCOLL_UNUSABLE;
}
