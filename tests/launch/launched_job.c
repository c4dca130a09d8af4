/* A C API program as a launcher starts it (mpirun, srun --mpi=pmix): ibcoll_init with no
 * IBCOLL_* variable. Modes:
 *   collectives NP  the world has NP ranks, each rank once; allreduce and bcast from 4 B to
 *                   1 MiB on the world and on split communicators give the right values;
 *                   prints "rank R: collectives right" and exits 0
 *   twice NP        the same in two contexts one after the other: PMIx stays initialized
 *                   between them, and the second's exchanges must not take the first one's parts
 *   kill NP         rank NP-1 kills itself (SIGKILL) in the middle of a run of allreduces; each
 *                   other rank must get IBCOLL_ERR_PEER_FAILED within 30 s, prints
 *                   "rank R: clear error ...", finalizes and exits 0
 *   absent NP       rank NP-1 kills itself before ibcoll_init; each other rank's ibcoll_init
 *                   must fail within seconds with IBCOLL_ERR_PEER_FAILED saying that it ended
 *                   before the fence (the launcher's PMIx tells no rank of the death; its table
 *                   of the node's processes does), prints "rank R: clear error ..." and exits 0
 *   joined NP       rank NP-1 initializes PMIx and kills itself before ibcoll_init: each other
 *                   rank must fail within seconds with IBCOLL_ERR_PEER_FAILED, the fence
 *                   failing (PMIx saw the death) or, where it ended without the rank (mpirun
 *                   --enable-recovery), its part missing (a get of it must not wait: under
 *                   gds/hash it is asked of the server, which answers at once), or where
 *                   mpirun's notice of the death failed, the table saying it ended; prints
 *                   "rank R: clear error ..." and exits 0
 * Anything else is printed as "rank R: FAILED ..." and exits 1. */
#include <ibcoll/ibcoll.h>
#ifdef LAUNCHED_JOB_HAS_PMIX
#include <pmix.h>
#endif
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int my_rank = -1;

static int failed(const char* what, ibcoll_status_t status) {
  printf("rank %d: FAILED %s: %s: %s\n", my_rank, what, ibcoll_status_name(status),
         ibcoll_last_error());
  fflush(stdout);
  return 1;
}

#define CHECK(call)                                               \
  do {                                                            \
    ibcoll_status_t status_ = (call);                             \
    if (status_ != IBCOLL_SUCCESS) return failed(#call, status_); \
  } while (0)

#define EXPECT(condition, ...)             \
  do {                                     \
    if (!(condition)) {                    \
      printf("rank %d: FAILED ", my_rank); \
      printf(__VA_ARGS__);                 \
      printf("\n");                        \
      fflush(stdout);                      \
      return 1;                            \
    }                                      \
  } while (0)

/* Every size from 4 B to 1 MiB: sums of small integers (exact in float), and a bcast from a
 * root that moves with the size. */
static int sweep(ibcoll_comm_t comm, const char* name) {
  int rank, size;
  CHECK(ibcoll_comm_rank(comm, &rank));
  CHECK(ibcoll_comm_size(comm, &size));
  const size_t most = (1u << 20) / sizeof(float);
  float* in = malloc(most * sizeof(float));
  float* out = malloc(most * sizeof(float));
  unsigned char* bytes = malloc(most * sizeof(float));
  EXPECT(in && out && bytes, "out of memory");
  int result = 0;
  for (size_t count = 1; count <= most && result == 0; count *= 2) {
    for (size_t i = 0; i < count; ++i)
      in[i] = (float)((rank + 1) * (int)(i % 7));
    ibcoll_status_t status = ibcoll_allreduce(in, out, count, IBCOLL_FLOAT32, IBCOLL_SUM, comm);
    if (status != IBCOLL_SUCCESS) {
      result = failed("ibcoll_allreduce", status);
      break;
    }
    for (size_t i = 0; i < count && result == 0; ++i) {
      const float want = (float)(size * (size + 1) / 2 * (int)(i % 7));
      if (out[i] != want) {
        printf("rank %d: FAILED %s allreduce of %zu floats: [%zu] is %g, not %g\n", rank, name,
               count, i, out[i], want);
        result = 1;
      }
    }
    const int root = (int)(count % (size_t)size);
    const size_t length = count * sizeof(float);
    for (size_t i = 0; i < length; ++i)
      bytes[i] = rank == root ? (unsigned char)(i * 31 + count) : 0;
    status = ibcoll_bcast(bytes, length, IBCOLL_UINT8, root, comm);
    if (status != IBCOLL_SUCCESS) {
      result = failed("ibcoll_bcast", status);
      break;
    }
    for (size_t i = 0; i < length && result == 0; ++i) {
      if (bytes[i] != (unsigned char)(i * 31 + count)) {
        printf("rank %d: FAILED %s bcast of %zu bytes from %d: byte %zu wrong\n", rank, name,
               length, root, i);
        result = 1;
      }
    }
  }
  free(in);
  free(out);
  free(bytes);
  fflush(stdout);
  return result;
}

static int collectives(ibcoll_comm_t world, int expected) {
  int rank, size;
  CHECK(ibcoll_comm_rank(world, &rank));
  CHECK(ibcoll_comm_size(world, &size));
  EXPECT(size == expected, "the world has %d ranks, the launcher started %d", size, expected);
  /* Each rank once: the sums of the ranks and of their squares are those of 0..size-1. */
  int64_t mine[2] = {rank, (int64_t)rank * rank}, sums[2];
  CHECK(ibcoll_allreduce(mine, sums, 2, IBCOLL_INT64, IBCOLL_SUM, world));
  const int64_t n = size;
  EXPECT(sums[0] == n * (n - 1) / 2 && sums[1] == (n - 1) * n * (2 * n - 1) / 6,
         "ranks are not 0..%d once each (sums %lld, %lld)", size - 1, (long long)sums[0],
         (long long)sums[1]);
  if (sweep(world, "world")) return 1;
  /* Odd and even ranks, in reverse order; then the same split again. */
  for (int round = 0; round < 2; ++round) {
    ibcoll_comm_t half;
    CHECK(ibcoll_comm_split(world, rank % 2, -rank, &half));
    int half_rank, half_size;
    CHECK(ibcoll_comm_rank(half, &half_rank));
    CHECK(ibcoll_comm_size(half, &half_size));
    const int want_size = size / 2 + (rank % 2 == 0 ? size % 2 : 0);
    EXPECT(half_size == want_size && half_rank == want_size - 1 - rank / 2,
           "split: rank %d of %d, not %d of %d", half_rank, half_size, want_size - 1 - rank / 2,
           want_size);
    if (sweep(half, "split")) return 1;
    CHECK(ibcoll_comm_free(&half));
  }
  printf("rank %d: collectives right\n", rank);
  return 0;
}

static double seconds_since(const struct timespec* start) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (double)(now.tv_sec - start->tv_sec) + (double)(now.tv_nsec - start->tv_nsec) * 1e-9;
}

static int kill_one(ibcoll_comm_t world, int expected) {
  int rank, size;
  CHECK(ibcoll_comm_rank(world, &rank));
  CHECK(ibcoll_comm_size(world, &size));
  EXPECT(size == expected && size > 1, "the world has %d ranks, the launcher started %d", size,
         expected);
  double in[1024], out[1024];
  for (int i = 0; i < 1024; ++i)
    in[i] = rank;
  struct timespec since;
  for (int call = 0;; ++call) {
    if (call == 100 && rank == size - 1) raise(SIGKILL);
    if (call == 100) clock_gettime(CLOCK_MONOTONIC, &since);
    const ibcoll_status_t status =
        ibcoll_allreduce(in, out, 1024, IBCOLL_FLOAT64, IBCOLL_SUM, world);
    if (status == IBCOLL_SUCCESS) {
      EXPECT(call < 100 || seconds_since(&since) < 30, "no error 30 s after rank %d died",
             size - 1);
      continue;
    }
    EXPECT(call >= 100, "call %d failed before any rank died: %s", call, ibcoll_last_error());
    EXPECT(status == IBCOLL_ERR_PEER_FAILED, "call %d: %s, not a peer failure: %s", call,
           ibcoll_status_name(status), ibcoll_last_error());
    const double after = seconds_since(&since);
    EXPECT(after < 30, "the peer failure came %.1f s after rank %d died", after, size - 1);
    printf("rank %d: clear error %.1f s after rank %d died: %s\n", rank, after, size - 1,
           ibcoll_last_error());
    return 0;
  }
}

/* Rank NP-1 (PMIX_RANK, which the launcher's PMIx server sets) dies before it starts, or, with
   `joined`, once it has initialized PMIx; the others' ibcoll_init must say within seconds that it
   is gone. */
static int without_the_last(int expected, int joined) {
  const char* launched_rank = getenv("PMIX_RANK");
  if (launched_rank == NULL) {
    printf("rank ?: FAILED PMIX_RANK is unset\n");
    return 1;
  }
  my_rank = atoi(launched_rank);
  if (my_rank == expected - 1) {
#ifdef LAUNCHED_JOB_HAS_PMIX
    pmix_proc_t me;
    if (joined && PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS)
      printf("rank %d: FAILED PMIx_Init\n", my_rank);
#endif
    raise(SIGKILL);
  }
  ibcoll_context_t context;
  struct timespec since;
  clock_gettime(CLOCK_MONOTONIC, &since);
  const ibcoll_status_t status = ibcoll_init(&context);
  const double after = seconds_since(&since);
  if (status == IBCOLL_SUCCESS) {
    printf("rank %d: FAILED ibcoll_init succeeded without rank %d\n", my_rank, expected - 1);
    ibcoll_finalize(context);
    return 1;
  }
  /* PMIx's fence fails, or the rank's part is missing after it, or (where mpirun tells no one)
     the launcher's table of the node's processes says it ended. */
  EXPECT(status == IBCOLL_ERR_PEER_FAILED &&
             (strstr(ibcoll_last_error(), "is missing after the fence") ||
              strstr(ibcoll_last_error(), "PMIx_Fence (start) failed") ||
              strstr(ibcoll_last_error(), "ended before the PMIx fence (start) was done")),
         "ibcoll_init: %s, not a failed fence, a missing part or an ended rank: %s",
         ibcoll_status_name(status), ibcoll_last_error());
  if (!joined) {
    EXPECT(strstr(ibcoll_last_error(), "ended before the PMIx fence") != NULL,
           "ibcoll_init's error does not say that a rank ended before the fence: %s",
           ibcoll_last_error());
  }
  printf("rank %d: clear error after %.1f s: %s\n", my_rank, after, ibcoll_last_error());
  fflush(stdout); /* before PMIx's finalize at exit, which may be slow with a rank gone */
  return 0;
}

/* One context from ibcoll_init to ibcoll_finalize, running the mode. */
static int run_context(int collectives_mode, int expected) {
  ibcoll_context_t context;
  ibcoll_comm_t world;
  ibcoll_status_t status = ibcoll_init(&context);
  if (status != IBCOLL_SUCCESS) return failed("ibcoll_init", status);
  CHECK(ibcoll_comm_world(context, &world));
  CHECK(ibcoll_comm_rank(world, &my_rank));
  const int result = collectives_mode ? collectives(world, expected) : kill_one(world, expected);
  fflush(stdout);
  status = ibcoll_finalize(context);
  if (status != IBCOLL_SUCCESS && collectives_mode) return failed("ibcoll_finalize", status);
  return result;
}

int main(int argc, char** argv) {
  const char* mode = argc == 3 ? argv[1] : "";
  const int contexts = strcmp(mode, "twice") == 0 ? 2 : 1;
  if (strcmp(mode, "collectives") != 0 && strcmp(mode, "twice") != 0 && strcmp(mode, "kill") != 0 &&
      strcmp(mode, "absent") != 0 && strcmp(mode, "joined") != 0) {
    fprintf(stderr, "usage: %s collectives|twice|kill|absent|joined NP\n", argv[0]);
    return 2;
  }
  const int expected = atoi(argv[2]);
  if (strcmp(mode, "absent") == 0) return without_the_last(expected, 0);
  if (strcmp(mode, "joined") == 0) return without_the_last(expected, 1);
  for (int context = 0; context < contexts; ++context) {
    const int result = run_context(strcmp(mode, "kill") != 0, expected);
    if (result != 0) return result;
#ifdef LAUNCHED_JOB_HAS_PMIX
    /* Between two contexts the process stays connected to its PMIx server: a rank finalizing
       PMIx while the others already fence for the next context is taken for gone. */
    EXPECT(contexts == 1 || PMIx_Initialized(), "PMIx was finalized between two contexts");
#endif
  }
  return 0;
}
