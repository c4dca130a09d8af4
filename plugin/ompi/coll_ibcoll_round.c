/* One round of a communicator's id agreement (coll_ibcoll_module.c): the members' maximum of a
 * few int64, over the PML on a tag of its own, without blocking. A binomial tree gathers the
 * maximum to rank 0 and spreads it back down, so a rank handles at most log2(size) messages.
 *
 * Not Open MPI's own iallreduce: libnbc tags its calls in the order each rank starts them, and
 * a round starts whenever the previous one ends on that rank, so rounds and the program's own
 * non-blocking collectives on the communicator would be tagged in different orders on
 * different ranks and cross. Messages of one tag between two ranks arrive in the order sent,
 * and rounds run one after another, so one tag serves them all. */
#include "ompi_config.h"

#include <string.h>

#include "coll_ibcoll.h"
#include "ompi/mca/coll/base/coll_tags.h"
#include "ompi/mca/pml/pml.h"

/* Neighborhood collectives on Cartesian topologies count their tags down from
 * MCA_COLL_BASE_TAG_NEIGHBOR_BASE by two per dimension: only a topology of 513 dimensions would
 * reach the end of their range. The tags around it belong to libnbc, coll/ucc and hcoll. */
#define ROUND_TAG MCA_COLL_BASE_TAG_NEIGHBOR_END

enum { GATHERING, AWAITING_TOTAL, SPREADING, ENDED };

static int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

static ompi_request_t* post_receive(int64_t* into, int from, ompi_communicator_t* comm,
                                    bool* failed) {
  ompi_request_t* request = NULL;
  if (MCA_PML_CALL(irecv(into, IBCOLL_ROUND_VALUES, MPI_INT64_T, from, ROUND_TAG, comm,
                         &request)) != OMPI_SUCCESS) {
    *failed = true;
    return NULL;
  }
  return request;
}

static ompi_request_t* post_send(const int64_t* values, int to, ompi_communicator_t* comm,
                                 bool* failed) {
  ompi_request_t* request = NULL;
  if (MCA_PML_CALL(isend((void*)values, IBCOLL_ROUND_VALUES, MPI_INT64_T, to, ROUND_TAG,
                         MCA_PML_BASE_SEND_STANDARD, comm, &request)) != OMPI_SUCCESS) {
    *failed = true;
    return NULL;
  }
  return request;
}

/* Frees the requests that have completed (noting errors); true once none is left. */
static bool settled(ompi_request_t** requests, int n, bool* failed) {
  bool all = true;
  for (int i = 0; i < n; ++i) {
    if (!requests[i]) continue;
    if (!REQUEST_COMPLETE(requests[i])) {
      all = false;
      continue;
    }
    if (requests[i]->req_status.MPI_ERROR != MPI_SUCCESS) *failed = true;
    ompi_request_free(&requests[i]);
    requests[i] = NULL;
  }
  return all;
}

static void spread(mca_coll_ibcoll_round_t* round, ompi_communicator_t* comm) {
  for (int i = 0; i < round->children; ++i)
    round->sends[i] = post_send(round->total, round->child[i], comm, &round->failed);
  round->phase = SPREADING;
}

void mca_coll_ibcoll_round_start(mca_coll_ibcoll_round_t* round, ompi_communicator_t* comm,
                                 const int64_t vote[IBCOLL_ROUND_VALUES]) {
  const int rank = ompi_comm_rank(comm), size = ompi_comm_size(comm);
  memset(round, 0, sizeof(*round));
  memcpy(round->value, vote, sizeof(round->value));
  round->parent = -1;
  /* Rank r's children are r + 2^k for every 2^k below r's lowest set bit; its parent is r
   * without that bit. */
  for (int bit = 1; bit < size; bit <<= 1) {
    if (rank & bit) {
      round->parent = rank - bit;
      break;
    }
    if (rank + bit < size) round->child[round->children++] = rank + bit;
  }
  for (int i = 0; i < round->children; ++i)
    round->receives[i] = post_receive(round->from_child[i], round->child[i], comm, &round->failed);
  round->phase = GATHERING;
}

bool mca_coll_ibcoll_round_test(mca_coll_ibcoll_round_t* round, ompi_communicator_t* comm) {
  switch (round->phase) {
    case GATHERING:
      if (!settled(round->receives, round->children, &round->failed)) return false;
      for (int i = 0; i < round->children; ++i) {
        for (int v = 0; v < IBCOLL_ROUND_VALUES; ++v)
          round->value[v] = max64(round->value[v], round->from_child[i][v]);
      }
      if (round->failed) round->value[IBCOLL_ROUND_BROKEN] = 1;
      if (round->parent < 0) {
        memcpy(round->total, round->value, sizeof(round->total));
        spread(round, comm);
        break;
      }
      round->to_parent = post_send(round->value, round->parent, comm, &round->failed);
      round->from_parent = post_receive(round->total, round->parent, comm, &round->failed);
      round->phase = AWAITING_TOTAL;
      /* fall through */
    case AWAITING_TOTAL:
      if (!settled(&round->from_parent, 1, &round->failed)) return false;
      /* Below a failure, everyone learns of it; the ranks above learn it from their own. */
      if (round->failed) round->total[IBCOLL_ROUND_BROKEN] = 1;
      spread(round, comm);
      break;
    default:
      break;
  }
  if (round->phase == SPREADING && settled(round->sends, round->children, &round->failed) &&
      settled(&round->to_parent, 1, &round->failed)) {
    round->phase = ENDED;
  }
  return round->phase == ENDED;
}
