/* component_bench: MPI_Allreduce and MPI_Bcast timed with and without coll/ibcoll in one run.
 * Two duplicates of MPI_COMM_WORLD: one that excludes the component (the info key
 * "ompi_comm_coll_preference" = "^ibcoll": Open MPI's own collectives), one that keeps it.
 * Size by size, both are timed in alternating rounds, and the table shows each side's median
 * round and the ratio. By default a round times calls back to back (pipelined), and its figure
 * is the slowest rank's average per call; with --osu, as OSU's osu_allreduce / osu_bcast do,
 * each call is timed alone, with a barrier (Open MPI's, on the plain duplicate) after it, and
 * the figure is the ranks' average latency. Last, communicators as libraries use them: cycles
 * of MPI_Comm_dup, one MPI_Allreduce of an int on the duplicate and MPI_Comm_free, duplicating
 * the plain duplicate (Open MPI's own all through) and the one that keeps the component (its
 * duplicates map themselves to ibcoll at their first call), the slowest rank's average cycle.
 * Start it under mpirun with the component loaded (ci/bench does). Plain MPI: no ibcoll header
 * or library.
 *   usage: component_bench [--max-size BYTES] [--rounds N] [--osu] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { kMaxRounds = 64 };

static int compare_doubles(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

static double median(double* values, int n) {
  qsort(values, (size_t)n, sizeof(double), compare_doubles);
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

static void call(MPI_Comm comm, int allreduce, char* send, char* recv, size_t bytes) {
  const int count = (int)(allreduce ? bytes / sizeof(float) : bytes);
  if (allreduce) {
    MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, comm);
  } else {
    MPI_Bcast(recv, count, MPI_BYTE, 0, comm);
  }
}

/* Seconds per call of `iterations` calls on `comm`: back to back, the slowest rank's; or (osu)
 * each alone followed by a barrier on `between`, the ranks' average. */
static double time_calls(MPI_Comm comm, MPI_Comm between, int osu, int allreduce, char* send,
                         char* recv, size_t bytes, int iterations) {
  double mine = 0, all = 0;
  MPI_Barrier(between);
  if (osu) {
    for (int i = 0; i < iterations; ++i) {
      const double start = MPI_Wtime();
      call(comm, allreduce, send, recv, bytes);
      mine += MPI_Wtime() - start;
      MPI_Barrier(between);
    }
    mine /= iterations;
    int size = 1;
    MPI_Comm_size(between, &size);
    MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_SUM, between);
    return all / size;
  }
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i)
    call(comm, allreduce, send, recv, bytes);
  mine = (MPI_Wtime() - start) / iterations;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, between);
  return all;
}

/* Seconds per cycle of `cycles` dup / allreduce / free cycles on duplicates of `parent` made
 * with `info` (a duplicate does not inherit its parent's info), the slowest rank's. */
static double time_communicators(MPI_Comm parent, MPI_Info info, MPI_Comm between, int cycles) {
  MPI_Barrier(between);
  const double start = MPI_Wtime();
  for (int i = 0; i < cycles; ++i) {
    MPI_Comm comm;
    MPI_Comm_dup_with_info(parent, info, &comm);
    int one = 1, sum = 0;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
    MPI_Comm_free(&comm);
  }
  double mine = (MPI_Wtime() - start) / cycles, all = 0;
  MPI_Allreduce(&mine, &all, 1, MPI_DOUBLE, MPI_MAX, between);
  return all;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  size_t max_size = 16u << 20;
  int rounds = 5, osu = 0, rank, size;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--osu") == 0) {
      osu = 1;
    } else if (i + 1 < argc && strcmp(argv[i], "--max-size") == 0) {
      max_size = strtoull(argv[++i], NULL, 0);
    } else if (i + 1 < argc && strcmp(argv[i], "--rounds") == 0) {
      rounds = atoi(argv[++i]);
    }
  }
  if (rounds < 1 || rounds > kMaxRounds) rounds = 5;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Info without;
  MPI_Info_create(&without);
  MPI_Info_set(without, "ompi_comm_coll_preference", "^ibcoll");
  MPI_Comm plain, through;
  MPI_Comm_dup_with_info(MPI_COMM_WORLD, without, &plain);
  MPI_Comm_dup(MPI_COMM_WORLD, &through);

  char* send = malloc(max_size);
  char* recv = malloc(max_size);
  memset(send, 1, max_size);
  memset(recv, 0, max_size);
  if (rank == 0) {
    printf(
        "# MPI_Allreduce (float sum) and MPI_Bcast, %d ranks: Open MPI's own vs through "
        "coll/ibcoll, same run, median of %d rounds; %s\n",
        size, rounds,
        osu ? "each call timed alone, a barrier after it, the ranks' average (OSU)"
            : "calls back to back, the slowest rank's average");
    printf("%-10s %10s %14s %14s %8s\n", "collective", "bytes", "openmpi(us)", "ibcoll(us)",
           "ratio");
  }
  for (int allreduce = 1; allreduce >= 0; --allreduce) {
    for (size_t bytes = 8; bytes <= max_size; bytes *= 4) {
      const int iterations = bytes <= 65536 ? 200 : bytes <= (1u << 20) ? 20 : 4;
      double without_ibcoll[kMaxRounds], with_ibcoll[kMaxRounds];
      time_calls(plain, plain, osu, allreduce, send, recv, bytes, 2); /* warm both up */
      time_calls(through, plain, osu, allreduce, send, recv, bytes, 2);
      for (int r = 0; r < rounds; ++r) {
        without_ibcoll[r] = time_calls(plain, plain, osu, allreduce, send, recv, bytes, iterations);
        with_ibcoll[r] = time_calls(through, plain, osu, allreduce, send, recv, bytes, iterations);
      }
      const double a = median(without_ibcoll, rounds) * 1e6, b = median(with_ibcoll, rounds) * 1e6;
      if (rank == 0) {
        printf("%-10s %10zu %14.2f %14.2f %8.2f\n", allreduce ? "allreduce" : "bcast", bytes, a, b,
               b / a);
        fflush(stdout);
      }
    }
  }
  double without_ibcoll[kMaxRounds], with_ibcoll[kMaxRounds];
  time_communicators(plain, without, plain, 20); /* warm both up */
  time_communicators(through, MPI_INFO_NULL, plain, 20);
  for (int r = 0; r < rounds; ++r) {
    without_ibcoll[r] = time_communicators(plain, without, plain, 500);
    with_ibcoll[r] = time_communicators(through, MPI_INFO_NULL, plain, 500);
  }
  if (rank == 0) {
    const double a = median(without_ibcoll, rounds) * 1e6, b = median(with_ibcoll, rounds) * 1e6;
    printf("%-10s %10s %14.2f %14.2f %8.2f\n", "comm-cycle", "4", a, b, b / a);
  }
  MPI_Info_free(&without);
  free(send);
  free(recv);
  MPI_Comm_free(&plain);
  MPI_Comm_free(&through);
  MPI_Finalize();
  return 0;
}
