/* The smallest ibcoll program: every rank contributes its rank number, all learn the sum; then
 * rank 0 broadcasts a greeting. Start it like any MPI program, `mpirun -np 4 ./allreduce` or
 * `srun --mpi=pmix -n 4 ./allreduce`: ibcoll finds the job through the launcher's PMIx. */
#include <ibcoll/ibcoll.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static int fail(const char* call) {
  fprintf(stderr, "%s: %s\n", call, ibcoll_last_error());
  return 1;
}

int main(void) {
  ibcoll_context_t context;
  ibcoll_comm_t world;
  int rank, size;
  if (ibcoll_init(&context) != IBCOLL_SUCCESS) return fail("ibcoll_init");
  ibcoll_comm_world(context, &world);
  ibcoll_comm_rank(world, &rank);
  ibcoll_comm_size(world, &size);

  int64_t sum = 0, mine = rank;
  if (ibcoll_allreduce(&mine, &sum, 1, IBCOLL_INT64, IBCOLL_SUM, world) != IBCOLL_SUCCESS) {
    return fail("ibcoll_allreduce");
  }
  char greeting[32] = "";
  if (rank == 0) snprintf(greeting, sizeof(greeting), "hello from %d ranks", size);
  if (ibcoll_bcast(greeting, sizeof(greeting), IBCOLL_UINT8, 0, world) != IBCOLL_SUCCESS) {
    return fail("ibcoll_bcast");
  }
  const int right = sum == (int64_t)size * (size - 1) / 2 && strstr(greeting, "hello") != NULL;
  printf("rank %d: sum %lld, \"%s\" (%s)\n", rank, (long long)sum, greeting,
         right ? "right" : "WRONG");
  if (ibcoll_finalize(context) != IBCOLL_SUCCESS) return fail("ibcoll_finalize");
  return right ? 0 : 1;
}
