/* A module per communicator: what it saves at enable (the previous providers, for fallback)
 * and its ibcoll communicator, mapped at the first call without blocking. */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coll_ibcoll.h"
#include "ompi/proc/proc.h"
#include "opal/util/output.h"

/* Modules whose id agreement runs here (linked by next_agreeing): the progress callback moves
 * them on. Locked. */
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

/* The id agreement goes in rounds (coll_ibcoll_round.c), each the members' maximum of what
 * they put in. In each round a member offers the lowest id of its communicator's parity that is
 * free here and not offered by another agreement running here, and its stamp; the round chooses
 * the largest offer and stamp. A member takes the chosen id by making the ibcoll communicator
 * with it and the stamp at once, unless another agreement here has taken it or offers it with a
 * lower MPI context id (the same on every member: contests between two agreements go the same
 * way everywhere). The next round says whether every member took it: then it is the id; else
 * those that took it abandon theirs (ibcoll_comm_abandon: the members that did not take it never
 * will, so what the takers hold on their node is let go) and all go on with the id that round
 * chose. Every member sees each round's stamp, taker or not, so no later agreement of theirs
 * chooses it again. Every member sees the same rounds, so all reach the same outcome, and none
 * waits for another agreement: the one running here can go on while another waits for a member
 * that is still inside some other call. Freed communicators' ids are free again. */
enum { kMaxRounds = 64 }; /* then the members give up together: the communicator falls back */

static bool free_here(unsigned id) {
  int is_free = 0;
  ibcoll_comm_id_free(mca_coll_ibcoll_component.context, id, &is_free);
  return is_free;
}

/* This rank's stamp, once it has seen `seen` (0: none). */
static uint64_t stamp_after(uint64_t seen) {
  uint64_t stamp = 0;
  ibcoll_comm_stamp(mca_coll_ibcoll_component.context, seen, &stamp);
  return stamp;
}

/* Whether another agreement here offers `id` (with a lower context id when `lower` is set). */
static bool offered_by_another(const mca_coll_ibcoll_module_t* m, unsigned id, bool lower) {
  for (const mca_coll_ibcoll_module_t* a = agreeing; a; a = a->next_agreeing) {
    if (a != m && a->offer == id && (!lower || a->comm->c_contextid < m->comm->c_contextid))
      return true;
  }
  return false;
}

/* Starts the next round: `rejected` says whether this rank could not take the id the last
 * round chose; the offer is the lowest id of the parity from `floor` that is free and offered
 * by no one else here (past UINT16_MAX when none is left). */
static void vote(mca_coll_ibcoll_module_t* m, bool rejected, unsigned floor) {
  /* Offers keep to the parity of the context id (the same on every member): two agreements that
   * run at once on consecutive context ids (two dups) never contest an id. Contested ids could
   * be taken on some members and refused on others round after round, when the members' other
   * agreements were at different rounds, until all gave up at kMaxRounds. */
  const unsigned parity = m->comm->c_contextid % 2;
  unsigned id = floor + (floor % 2 != parity);
  while (id <= UINT16_MAX && (!free_here(id) || offered_by_another(m, id, false)))
    id += 2;
  m->offer = id;
  const int64_t values[IBCOLL_ROUND_VALUES] = {[IBCOLL_ROUND_REJECTED] = rejected,
                                               [IBCOLL_ROUND_OFFER] = id,
                                               [IBCOLL_ROUND_BROKEN] = 0,
                                               [IBCOLL_ROUND_STAMP] = (int64_t)stamp_after(0)};
  mca_coll_ibcoll_round_start(m->round, m->comm, values);
  ++m->rounds;
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
  m->offer = 0;
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
  /* A duplicate of a mapped communicator needs no list of its members: it will share its
   * parent's (nothing of its mapping grows with the members). */
  bool foreign = false;
  if (!mca_coll_ibcoll_same_members(m)) {
    m->world_ranks = world_ranks_of(m->comm, &foreign);
    if (!m->world_ranks) {
      unusable(m, foreign ? "a member belongs to another job" : "out of memory");
      return;
    }
  }
  m->round = malloc(sizeof(*m->round));
  if (!m->round) {
    free(m->world_ranks);
    m->world_ranks = NULL;
    unusable(m, "out of memory");
    return;
  }
  m->mapping = IBCOLL_AGREEING;
  m->next_agreeing = agreeing;
  agreeing = m;
  vote(m, false, 2);
}

/* Makes m's ibcoll communicator with `id` and `stamp`: from a mapped communicator of the same
 * members when there is one (then it shares their list), else from the members' world ranks. */
static bool make_ibcoll_comm(mca_coll_ibcoll_module_t* m, unsigned id, uint64_t stamp) {
  ibcoll_context_t context = mca_coll_ibcoll_component.context;
  ibcoll_comm_t like = mca_coll_ibcoll_same_members(m);
  m->shares_members = like != NULL;
  if (like) return ibcoll_comm_like(like, id, stamp, &m->ibcoll_comm) == IBCOLL_SUCCESS;
  bool foreign = false;
  if (!m->world_ranks) m->world_ranks = world_ranks_of(m->comm, &foreign); /* it went since */
  return m->world_ranks && ibcoll_comm_from_ranks(context, m->world_ranks, ompi_comm_size(m->comm),
                                                  id, stamp, &m->ibcoll_comm) == IBCOLL_SUCCESS;
}

/* A round has ended: done, or take the id it chose and start the next round. */
static void round_ended(mca_coll_ibcoll_module_t* m) {
  const int64_t* total = m->round->total;
  const bool broken = total[IBCOLL_ROUND_BROKEN] != 0;
  const bool everyone_took = m->rounds > 1 && total[IBCOLL_ROUND_REJECTED] == 0;
  const uint64_t stamp = (uint64_t)total[IBCOLL_ROUND_STAMP];
  stamp_after(stamp);
  if (broken || everyone_took || m->rounds == kMaxRounds ||
      total[IBCOLL_ROUND_OFFER] > UINT16_MAX) {
    free(m->round);
    m->round = NULL;
    stop_agreeing(m);
    if (everyone_took && !broken) {
      m->mapping = IBCOLL_MAPPED;
      opal_output_verbose(10, mca_coll_ibcoll_component.output,
                          "coll:ibcoll: %s: mapped after %u rounds, %s", m->comm->c_name, m->rounds,
                          m->shares_members ? "sharing the members' list of another"
                                            : "from the members' world ranks");
      return;
    }
    if (m->ibcoll_comm) ibcoll_comm_abandon(&m->ibcoll_comm);
    unusable(m, broken                    ? "a message of the id agreement failed"
                : m->rounds == kMaxRounds ? "the id agreement went on too long"
                                          : "no ibcoll id is left");
    return;
  }
  if (m->ibcoll_comm) ibcoll_comm_abandon(&m->ibcoll_comm); /* another member did not take it */
  const unsigned id = (unsigned)total[IBCOLL_ROUND_OFFER];
  m->offer = 0;
  const bool take =
      free_here(id) && !offered_by_another(m, id, true) && make_ibcoll_comm(m, id, stamp);
  vote(m, !take, id + 1);
}

void mca_coll_ibcoll_settle(mca_coll_ibcoll_module_t* m) {
  if (m->mapping == IBCOLL_UNMAPPED) begin_mapping(m);
  while (m->mapping == IBCOLL_AGREEING) {
    if (!mca_coll_ibcoll_round_test(m->round, m->comm)) return;
    round_ended(m);
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
  const bool unconfirmed = m->mapping == IBCOLL_AGREEING;
  if (unconfirmed) {
    /* Only an erroneous program frees a communicator inside its first call: the round's
     * messages may still land in its memory, which is left to them. */
    m->round = NULL;
    stop_agreeing(m);
  }
  if (m->ibcoll_comm && m->comm != &ompi_mpi_comm_world.comm) {
    /* One taken in a round not yet confirmed: the other members may never make it. */
    if (unconfirmed) {
      ibcoll_comm_abandon(&m->ibcoll_comm);
    } else {
      ibcoll_comm_free(&m->ibcoll_comm);
    }
  }
  m->ibcoll_comm = NULL;
  m->mapping = IBCOLL_UNUSABLE;
}
