/* CHECK(condition, format, ...): on failure, say which rank failed and what, and abort the job.
 * For the MPI test programs here; each sets world_rank after MPI_Init. */
#ifndef IBCOLL_TESTS_OMPI_CHECK_H
#define IBCOLL_TESTS_OMPI_CHECK_H

#include <mpi.h>
#include <stdio.h>

static int world_rank;

#define CHECK(cond, ...)                                      \
  do {                                                        \
    if (!(cond)) {                                            \
      fprintf(stderr, "rank %d: check failed: ", world_rank); \
      fprintf(stderr, __VA_ARGS__);                           \
      fprintf(stderr, "\n");                                  \
      MPI_Abort(MPI_COMM_WORLD, 1);                           \
    }                                                         \
  } while (0)

#endif
