/* A training-style loop that survives the loss of ranks. Each step, every rank allreduces its
 * gradient (a vector of floats) and moves its model by the mean. When a step fails because a
 * rank died, went silent or was cut off, the survivors revoke the communicator (so that every
 * member's step fails at once, also those not waiting on the dead rank), shrink it to the ranks
 * left, and do the step again among them (a rank whose step ended just before the death takes it
 * back, so that all redo the same step). At the end each rank says how many steps it lost,
 * how long getting going again took, and its model's digest: the same on every survivor.
 *
 *   mpirun --enable-recovery -np 4 ./elastic_allreduce [STEPS]
 *
 * ELASTIC_DIE=RANK:STEP makes that rank kill itself during that step, to see it happen
 * (mpirun --enable-recovery keeps the others running when a rank dies). */
#include <ibcoll/ibcoll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { kGradient = 1 << 16 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* This rank's gradient at `step`: small integers, so that their sum is exact in any order. */
static void gradient(float* g, int world_rank, int step) {
  for (int i = 0; i < kGradient; ++i)
    g[i] = (float)((world_rank + step + i) % 7) - 3.0f;
}

int main(int argc, char** argv) {
  const int steps = argc > 1 ? atoi(argv[1]) : 100;
  int die_rank = -1, die_step = -1;
  if (getenv("ELASTIC_DIE")) sscanf(getenv("ELASTIC_DIE"), "%d:%d", &die_rank, &die_step);

  ibcoll_context_t context;
  ibcoll_comm_t world, comm;
  if (ibcoll_init(&context) != IBCOLL_SUCCESS) {
    fprintf(stderr, "ibcoll_init: %s\n", ibcoll_last_error());
    return 1;
  }
  ibcoll_comm_world(context, &world);
  comm = world;
  int world_rank, size;
  ibcoll_comm_rank(world, &world_rank);
  ibcoll_comm_size(world, &size);

  static float model[kGradient], before[kGradient], sum[kGradient];
  int lost = 0;
  double failed_at = 0, recovered_in = 0;
  for (int done = 0; done < steps;) {
    if (world_rank == die_rank && done == die_step) raise(SIGKILL);
    gradient(sum, world_rank, done);
    ibcoll_status_t s =
        ibcoll_allreduce(IBCOLL_IN_PLACE, sum, kGradient, IBCOLL_FLOAT32, IBCOLL_SUM, comm);
    if (s == IBCOLL_SUCCESS) {
      int members;
      ibcoll_comm_size(comm, &members);
      memcpy(before, model, sizeof(model));
      for (int i = 0; i < kGradient; ++i)
        model[i] -= 0.01f * sum[i] / (float)members;
      if (failed_at > 0) {
        recovered_in = now() - failed_at;
        failed_at = 0;
      }
      ++done;
      continue;
    }
    if (failed_at == 0) failed_at = now();
    ++lost;
    /* The step failed: every member is told at once, the live ones agree on who is gone and go
       on among themselves, from the first step that not every one of them finished (a rank
       whose step ended before the death is one ahead: it takes that step back). */
    while (s != IBCOLL_SUCCESS) {
      if (s != IBCOLL_ERR_PEER_FAILED && s != IBCOLL_ERR_REVOKED && s != IBCOLL_ERR_TIMEOUT) {
        fprintf(stderr, "rank %d: step %d: %s: %s\n", world_rank, done, ibcoll_status_name(s),
                ibcoll_last_error());
        return 1;
      }
      ibcoll_comm_revoke(comm);
      ibcoll_comm_t shrunk;
      if (ibcoll_comm_shrink(comm, &shrunk) != IBCOLL_SUCCESS) {
        fprintf(stderr, "rank %d: shrink: %s\n", world_rank, ibcoll_last_error());
        return 1;
      }
      int failed = 0, members = 0;
      ibcoll_comm_failed_ranks(comm, NULL, 0, &failed);
      ibcoll_comm_size(shrunk, &members);
      printf("rank %d: step %d failed; %d ranks failed, going on with %d\n", world_rank, done,
             failed, members);
      if (comm != world) ibcoll_comm_free(&comm);
      comm = shrunk;
      int resume = done;
      s = ibcoll_allreduce(&done, &resume, 1, IBCOLL_INT32, IBCOLL_MIN, comm);
      if (s == IBCOLL_SUCCESS && resume < done) {
        memcpy(model, before, sizeof(model));
        lost += done - resume;
        done = resume;
      }
    }
  }

  uint64_t digest = 1469598103934665603ull; /* FNV-1a over the model's bytes */
  for (size_t i = 0; i < sizeof(model); ++i) {
    digest ^= ((const unsigned char*)model)[i];
    digest *= 1099511628211ull;
  }
  int members;
  ibcoll_comm_size(comm, &members);
  printf("rank %d: %d steps on %d of %d ranks, %d lost, going again took %.3f s, model %016llx\n",
         world_rank, steps, members, size, lost, recovered_in, (unsigned long long)digest);
  if (comm != world) ibcoll_comm_free(&comm);
  return ibcoll_finalize(context) == IBCOLL_SUCCESS ? 0 : 1;
}
