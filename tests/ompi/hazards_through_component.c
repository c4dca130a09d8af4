/* MPI programs that once hung or failed through coll/ibcoll at priority 100 where Open MPI's own
 * collectives pass, one scenario per run (the first argument names it; run_component_test runs
 * it). Each prints "SCENARIO: all results right on N ranks" from rank 0 when it passed.
 *
 *  dup-of-dup        THREAD_MULTIPLE: an allreduce on the world, then a dup of it and a dup of
 *                    the dup, whose context id allocation is the first collective on the first
 *                    dup (it deadlocked while that communicator was being mapped).
 *  two-threads       THREAD_MULTIPLE: two threads per rank, each running allreduces and bcasts
 *                    on its own communicator at once.
 *  first-nonblocking A non-blocking call is the first use of a communicator, and ranks meet in
 *                    a barrier on another one before waiting for it (valid MPI: a non-blocking
 *                    collective must not wait for the other ranks).
 *  bcast-layouts     Ranks pass datatypes with the same type signature and different layouts
 *                    (MPI_INT x 2 at the root, a strided vector elsewhere, and the other way
 *                    round), blocking and not: the data arrives either way.
 *  beside-mapping    Open MPI's own non-blocking collectives run on a communicator while its
 *                    mapping runs, each rank starting them at another point of it (the mapping
 *                    once ran on Open MPI's iallreduce, and its rounds crossed these).
 *  crossed-first     Pairs of communicators whose first calls, non-blocking, come in one order
 *                    on even ranks and the other on odd ranks: both mappings contest the same
 *                    ids, and each must still get one.
 *  bcast-no-memory   Rank 1 cannot allocate the buffer that a strided bcast of 64 MiB is packed
 *                    into (its address space limited just before the call), blocking and not:
 *                    the call fails on every rank within seconds (it used to leave the others
 *                    waiting for their deadline), and the next bcast delivers. Not under ASan,
 *                    whose shadow memory needs an unlimited address space.
 *  dup-free-cycles   200 cycles of MPI_Comm_dup, an allreduce and MPI_Comm_free, with few ids
 *                    (IBCOLL_COMM_IDS): ids of freed communicators are taken again, so every
 *                    call is ibcoll's (ids were never reused, and after ~32k dups in a process
 *                    every new communicator fell back).
 *  contested-ids     3 ranks: 300 times, communicators on {1, 2}, {0, 2} and {0, 1} made one
 *                    after the other while the earlier ones live (each with a context id of the
 *                    same parity: an unused dup between them takes the other), so the last one's
 *                    members offer different ids, and rank 1 takes the one rank 0's {0, 2}
 *                    holds: the round is rejected, and what rank 1 bound on the node is let go
 *                    (it leaked, and after 128 such rounds communicators ran without slots,
 *                    after 512 fell back; and it joined {0, 2}'s slot set).
 *  root-finalizes-first  The last call is a small bcast whose root returns at once (without
 *                    slots: IBCOLL_SHM_SLOTS=0) and goes on to MPI_Finalize, while the others
 *                    come to the bcast a second later: finalize lets that call end first (it
 *                    once drove the component's progress there, whose lock finalize does not
 *                    hold, and deadlocked). */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "check.h"

static int world_size;

/* An allreduce of `count` ints (rank + i) on `comm`, checked. */
static void checked_allreduce(MPI_Comm comm, int count) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int* values = malloc((size_t)count * sizeof(int));
  for (int i = 0; i < count; ++i)
    values[i] = rank + i;
  MPI_Allreduce(MPI_IN_PLACE, values, count, MPI_INT, MPI_SUM, comm);
  for (int i = 0; i < count; ++i)
    CHECK(values[i] == size * (size - 1) / 2 + size * i, "allreduce of %d at %d: %d", count, i,
          values[i]);
  free(values);
}

static void dup_of_dup(void) {
  checked_allreduce(MPI_COMM_WORLD, 1);
  MPI_Comm dup, dup_of_dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_dup(dup, &dup_of_dup);
  checked_allreduce(dup, 3);
  checked_allreduce(dup_of_dup, 5);
  MPI_Comm_free(&dup_of_dup);
  MPI_Comm_free(&dup);
}

typedef struct {
  MPI_Comm comm;
  int thread;
} thread_work;

static void* run_thread(void* argument) {
  const thread_work* work = argument;
  int rank;
  MPI_Comm_rank(work->comm, &rank);
  for (int round = 0; round < 200; ++round) {
    checked_allreduce(work->comm, 1 + (round % 7) * 301 + work->thread);
    long value = rank == round % world_size ? round * 10 + work->thread : -1;
    MPI_Bcast(&value, 1, MPI_LONG, round % world_size, work->comm);
    CHECK(value == round * 10 + work->thread, "bcast in thread %d round %d: %ld", work->thread,
          round, value);
  }
  return NULL;
}

static void two_threads(void) {
  thread_work work[2];
  pthread_t threads[2];
  for (int t = 0; t < 2; ++t) {
    work[t].thread = t;
    MPI_Comm_dup(MPI_COMM_WORLD, &work[t].comm);
  }
  for (int t = 0; t < 2; ++t)
    CHECK(pthread_create(&threads[t], NULL, run_thread, &work[t]) == 0, "pthread_create");
  for (int t = 0; t < 2; ++t)
    pthread_join(threads[t], NULL);
  for (int t = 0; t < 2; ++t)
    MPI_Comm_free(&work[t].comm);
}

static void first_nonblocking(void) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  double value = world_rank + 1.0;
  MPI_Request request;
  if (world_rank == 0) {
    MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, dup, &request);
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_SUM, dup, &request);
  }
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  CHECK(value == world_size * (world_size + 1) / 2.0, "iallreduce: %g", value);
  /* Later calls on it, in the other order, still go through. */
  MPI_Iallreduce(MPI_IN_PLACE, &value, 1, MPI_DOUBLE, MPI_MAX, dup, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  CHECK(value == world_size * (world_size + 1) / 2.0, "second iallreduce: %g", value);
  MPI_Comm_free(&dup);
}

/* `pairs` pairs of ints: the root sends pairs as 2*pairs MPI_INT or as `pairs` strided vectors
 * (each pair spread over 3 ints, the middle one untouched), and so does every other rank, in the
 * layout `strided_at_root` does not give the root. */
static void bcast_in_layouts(int pairs, int strided_at_root, int blocking) {
  MPI_Datatype strided;
  MPI_Type_vector(2, 1, 2, MPI_INT, &strided); /* ints 0 and 2 of every 3 */
  MPI_Type_commit(&strided);
  const int root = world_size - 1;
  const int strided_here = (world_rank == root) == strided_at_root;
  const int ints = 3 * pairs;
  int* data = malloc((size_t)ints * sizeof(int));
  for (int i = 0; i < ints; ++i)
    data[i] = world_rank == root ? i : -1;
  /* The values pair k carries: ints 3k and 3k+2 when strided, else 2k and 2k+1. */
  MPI_Request request;
  if (blocking) {
    if (strided_here)
      MPI_Bcast(data, pairs, strided, root, MPI_COMM_WORLD);
    else
      MPI_Bcast(data, 2 * pairs, MPI_INT, root, MPI_COMM_WORLD);
  } else {
    if (strided_here)
      MPI_Ibcast(data, pairs, strided, root, MPI_COMM_WORLD, &request);
    else
      MPI_Ibcast(data, 2 * pairs, MPI_INT, root, MPI_COMM_WORLD, &request);
    MPI_Wait(&request, MPI_STATUS_IGNORE);
  }
  if (world_rank != root) {
    for (int k = 0; k < pairs; ++k) {
      /* What the root sent as its k-th pair. */
      const int first = strided_at_root ? 3 * k : 2 * k;
      const int second = strided_at_root ? 3 * k + 2 : 2 * k + 1;
      const int at_first = strided_here ? 3 * k : 2 * k;
      const int at_second = strided_here ? 3 * k + 2 : 2 * k + 1;
      CHECK(data[at_first] == first && data[at_second] == second,
            "bcast of %d pairs (strided at root %d, blocking %d): pair %d is %d %d", pairs,
            strided_at_root, blocking, k, data[at_first], data[at_second]);
      if (strided_here) CHECK(data[3 * k + 1] == -1, "bcast wrote between the strided ints");
    }
  }
  free(data);
  MPI_Type_free(&strided);
}

static void bcast_layouts(void) {
  const int sizes[] = {1, 1000, 70000};
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); ++s) {
    for (int strided_at_root = 0; strided_at_root < 2; ++strided_at_root) {
      for (int blocking = 0; blocking < 2; ++blocking)
        bcast_in_layouts(sizes[s], strided_at_root, blocking);
    }
  }
}

/* Spins in MPI_Test for `seconds` (or until the request is done): the mapping under way moves
 * on as far as it can. */
static void progress_for(MPI_Request* request, double seconds) {
  int done = 0;
  for (const double end = MPI_Wtime() + seconds; MPI_Wtime() < end && !done;)
    MPI_Test(request, &done, MPI_STATUS_IGNORE);
}

static void beside_mapping(void) {
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  for (int late = 0; late < world_size; ++late) {
    /* Rank `late` starts the iallreduce first and the gather only after its mapping has moved
     * on with the others; they start both calls at once. */
    int sum = world_rank + 1, mine = world_rank * 7 + late;
    int* gathered = malloc((size_t)world_size * sizeof(int));
    MPI_Request requests[2];
    if (world_rank != late) usleep(100000);
    MPI_Iallreduce(MPI_IN_PLACE, &sum, 1, MPI_INT, MPI_SUM, dup, &requests[0]);
    if (world_rank == late) progress_for(&requests[0], 0.3);
    MPI_Iallgather(&mine, 1, MPI_INT, gathered, 1, MPI_INT, dup, &requests[1]);
    MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    CHECK(sum == world_size * (world_size + 1) / 2, "iallreduce: %d", sum);
    for (int r = 0; r < world_size; ++r)
      CHECK(gathered[r] == r * 7 + late, "iallgather from %d: %d", r, gathered[r]);
    free(gathered);
    /* The next round's communicator is mapped anew. */
    MPI_Comm next;
    MPI_Comm_dup(dup, &next);
    MPI_Comm_free(&dup);
    dup = next;
  }
  MPI_Comm_free(&dup);
}

static void crossed_first(void) {
  for (int pair = 0; pair < 20; ++pair) {
    MPI_Comm comms[2];
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[0]);
    MPI_Comm_dup(MPI_COMM_WORLD, &comms[1]);
    int values[2] = {world_rank, 2 * world_rank};
    MPI_Request requests[2];
    for (int i = 0; i < 2; ++i) {
      const int c = world_rank % 2 ? 1 - i : i;
      MPI_Iallreduce(MPI_IN_PLACE, &values[c], 1, MPI_INT, MPI_SUM, comms[c], &requests[c]);
    }
    MPI_Waitall(2, requests, MPI_STATUSES_IGNORE);
    const int sum = world_size * (world_size - 1) / 2;
    CHECK(values[0] == sum && values[1] == 2 * sum, "pair %d: %d %d", pair, values[0], values[1]);
    MPI_Comm_free(&comms[0]);
    MPI_Comm_free(&comms[1]);
  }
}

static void dup_free_cycles(void) {
  for (int cycle = 0; cycle < 200; ++cycle) {
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    checked_allreduce(dup, 3);
    MPI_Comm_free(&dup);
  }
}

static void contested_ids(void) {
  CHECK(world_size == 3, "contested-ids runs on 3 ranks, not %d", world_size);
  for (int round = 0; round < 300; ++round) {
    MPI_Comm pairs[3], unused[2]; /* {1, 2}, {0, 2}, {0, 1}: pair p leaves out rank p */
    for (int p = 0; p < 3; ++p) {
      if (p > 0) MPI_Comm_dup(MPI_COMM_WORLD, &unused[p - 1]);
      MPI_Comm_split(MPI_COMM_WORLD, world_rank == p ? MPI_UNDEFINED : 0, world_rank, &pairs[p]);
      if (pairs[p] != MPI_COMM_NULL) checked_allreduce(pairs[p], 2);
    }
    for (int p = 0; p < 3; ++p)
      if (pairs[p] != MPI_COMM_NULL) MPI_Comm_free(&pairs[p]);
    MPI_Comm_free(&unused[0]);
    MPI_Comm_free(&unused[1]);
  }
}

/* Limits this process's address space to what it maps now and `spare` bytes more; returns the
 * limit it had. */
static struct rlimit limit_address_space(size_t spare) {
  struct rlimit had;
  getrlimit(RLIMIT_AS, &had);
  long pages = 0;
  FILE* statm = fopen("/proc/self/statm", "r");
  CHECK(statm && fscanf(statm, "%ld", &pages) == 1, "cannot read /proc/self/statm");
  fclose(statm);
  const struct rlimit tight = {(rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + spare, had.rlim_max};
  CHECK(setrlimit(RLIMIT_AS, &tight) == 0, "cannot limit the address space");
  return had;
}

static void bcast_no_memory(void) {
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  const int count = 16 << 20; /* ints: 64 MiB to pack where the layout is strided */
  MPI_Datatype strided;
  MPI_Type_vector(count, 1, 2, MPI_INT, &strided);
  MPI_Type_commit(&strided);
  int* data = malloc(2 * (size_t)count * sizeof(int));
  CHECK(data, "no memory for the test's own buffer");
  for (int blocking = 0; blocking < 2; ++blocking) {
    for (size_t i = 0; i < 2 * (size_t)count; ++i)
      data[i] = world_rank == 0 ? (int)i : -1;
    struct rlimit had;
    getrlimit(RLIMIT_AS, &had);
    if (world_rank == 1) had = limit_address_space(16 << 20); /* 16 MiB to spare, not 64 */
    const double start = MPI_Wtime();
    MPI_Request request;
    int rc;
    if (blocking) {
      rc = world_rank == 0 ? MPI_Bcast(data, count, MPI_INT, 0, MPI_COMM_WORLD)
                           : MPI_Bcast(data, 1, strided, 0, MPI_COMM_WORLD);
    } else {
      rc = world_rank == 0 ? MPI_Ibcast(data, count, MPI_INT, 0, MPI_COMM_WORLD, &request)
                           : MPI_Ibcast(data, 1, strided, 0, MPI_COMM_WORLD, &request);
      if (rc == MPI_SUCCESS) rc = MPI_Wait(&request, MPI_STATUS_IGNORE);
    }
    setrlimit(RLIMIT_AS, &had);
    const double took = MPI_Wtime() - start;
    CHECK(rc != MPI_SUCCESS, "a bcast that rank 1 had no memory for succeeded (blocking %d)",
          blocking);
    CHECK(took < 60, "the failed bcast took %.0f s (blocking %d)", took, blocking);
    /* The communicator still works. */
    int value = world_rank == 0 ? 42 + blocking : 0;
    CHECK(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS && value == 42 + blocking,
          "the bcast after the failed one: %d", value);
  }
  free(data);
  MPI_Type_free(&strided);
}

static void root_finalizes_first(void) {
  int value = world_rank == 0 ? 7 : 0;
  if (world_rank != 0) sleep(1);
  CHECK(MPI_Bcast(&value, 1, MPI_INT, 0, MPI_COMM_WORLD) == MPI_SUCCESS && value == 7,
        "the bcast gave %d", value);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr,
            "usage: %s dup-of-dup|two-threads|first-nonblocking|bcast-layouts|beside-mapping|"
            "crossed-first|dup-free-cycles|contested-ids|bcast-no-memory|root-finalizes-first\n",
            argv[0]);
    return 2;
  }
  const char* scenario = argv[1];
  const int threaded = !strcmp(scenario, "dup-of-dup") || !strcmp(scenario, "two-threads");
  int provided = MPI_THREAD_SINGLE;
  MPI_Init_thread(&argc, &argv, threaded ? MPI_THREAD_MULTIPLE : MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  CHECK(!threaded || provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided");
  if (!strcmp(scenario, "dup-of-dup")) {
    dup_of_dup();
  } else if (!strcmp(scenario, "two-threads")) {
    two_threads();
  } else if (!strcmp(scenario, "first-nonblocking")) {
    first_nonblocking();
  } else if (!strcmp(scenario, "bcast-layouts")) {
    bcast_layouts();
  } else if (!strcmp(scenario, "beside-mapping")) {
    beside_mapping();
  } else if (!strcmp(scenario, "crossed-first")) {
    crossed_first();
  } else if (!strcmp(scenario, "dup-free-cycles")) {
    dup_free_cycles();
  } else if (!strcmp(scenario, "contested-ids")) {
    contested_ids();
  } else if (!strcmp(scenario, "bcast-no-memory")) {
    bcast_no_memory();
  } else if (!strcmp(scenario, "root-finalizes-first")) {
    root_finalizes_first();
  } else {
    CHECK(0, "unknown scenario %s", scenario);
  }
  if (world_rank == 0) printf("%s: all results right on %d ranks\n", scenario, world_size);
  MPI_Finalize();
  return 0;
}
