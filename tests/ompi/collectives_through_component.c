/* An ordinary MPI program, run under mpirun with coll/ibcoll at priority 100 (run_component_test
 * says how). MPI_Allreduce, MPI_Bcast, MPI_Iallreduce and MPI_Ibcast on MPI_COMM_WORLD, a split
 * and a dup, in place and not, for most MPI types that map to an ibcoll type and every op, are
 * checked against references computed here. What ibcoll leaves to Open MPI (MINLOC, a user's
 * op, LOR, long double) and a bcast of a strided datatype, which ibcoll packs, use counts no
 * other call uses, so that the component's verbose log (one line per call) shows which way each
 * went; the runner checks those lines. The first argument is the thread level asked for: single
 * (MPI_Init) or multiple (MPI_Init_thread, MPI_THREAD_MULTIPLE, as mpi4py does). Exits non-zero on
 * the first wrong result. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

enum kind { SIGNED, UNSIGNED, REAL };
typedef struct {
  MPI_Datatype type;
  const char* name;
  size_t size;
  enum kind kind;
} type_info;

static const type_info types[] = {
    {MPI_INT8_T, "int8", 1, SIGNED},
    {MPI_UINT8_T, "uint8", 1, UNSIGNED},
    {MPI_SIGNED_CHAR, "signed char", 1, SIGNED},
    {MPI_UNSIGNED_CHAR, "unsigned char", 1, UNSIGNED},
    {MPI_INT16_T, "int16", 2, SIGNED},
    {MPI_UINT16_T, "uint16", 2, UNSIGNED},
    {MPI_SHORT, "short", 2, SIGNED},
    {MPI_INT32_T, "int32", 4, SIGNED},
    {MPI_UINT32_T, "uint32", 4, UNSIGNED},
    {MPI_INT, "int", 4, SIGNED},
    {MPI_UNSIGNED, "unsigned", 4, UNSIGNED},
    {MPI_INT64_T, "int64", 8, SIGNED},
    {MPI_UINT64_T, "uint64", 8, UNSIGNED},
    {MPI_LONG, "long", sizeof(long), SIGNED},
    {MPI_LONG_LONG, "long long", 8, SIGNED},
    {MPI_FLOAT, "float", 4, REAL},
    {MPI_DOUBLE, "double", 8, REAL},
};

/* Small values (1..3) so that sums and products over at most 4 ranks fit every type. */
static int64_t input(int rank, size_t i) {
  return (int64_t)((rank + 1 + i) % 3) + 1;
}

static void store(const type_info* t, void* buffer, size_t i, int64_t v) {
  char* p = (char*)buffer + i * t->size;
  if (t->kind == REAL) {
    if (t->size == 4)
      *(float*)p = (float)v;
    else
      *(double*)p = (double)v;
    return;
  }
  memcpy(p, &v, t->size); /* little-endian: the low bytes */
}

static int64_t load(const type_info* t, const void* buffer, size_t i) {
  const char* p = (const char*)buffer + i * t->size;
  if (t->kind == REAL)
    return t->size == 4 ? (int64_t) * (const float*)p : (int64_t) * (const double*)p;
  int64_t v = 0;
  memcpy(&v, p, t->size);
  if (t->kind == SIGNED && t->size < 8 && (v >> (8 * t->size - 1)) & 1)
    v -= (int64_t)1 << (8 * t->size);
  return v;
}

static int64_t reference(MPI_Op op, int ranks, size_t i) {
  int64_t r = input(0, i);
  for (int k = 1; k < ranks; ++k) {
    const int64_t v = input(k, i);
    if (op == MPI_SUM)
      r += v;
    else if (op == MPI_PROD)
      r *= v;
    else if (op == MPI_MIN)
      r = v < r ? v : r;
    else if (op == MPI_MAX)
      r = v > r ? v : r;
    else if (op == MPI_BAND)
      r &= v;
    else if (op == MPI_BOR)
      r |= v;
    else if (op == MPI_BXOR)
      r ^= v;
  }
  return r;
}

static void allreduce_everything(MPI_Comm comm, const char* comm_name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const MPI_Op ops[] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR};
  const size_t count = 1031;
  for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); ++t) {
    const type_info* ti = &types[t];
    for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); ++o) {
      if (ti->kind == REAL && o >= 4) continue; /* bitwise ops are for integers */
      for (int in_place = 0; in_place < 2; ++in_place) {
        char *send = malloc(count * ti->size), *recv = malloc(count * ti->size);
        for (size_t i = 0; i < count; ++i)
          store(ti, in_place ? recv : send, i, input(rank, i));
        MPI_Allreduce(in_place ? MPI_IN_PLACE : send, recv, (int)count, ti->type, ops[o], comm);
        /* The reference uses communicator ranks 0..size-1, as the inputs do. */
        for (size_t i = 0; i < count; ++i) {
          const int64_t want = reference(ops[o], size, i);
          CHECK(load(ti, recv, i) == want, "allreduce %s op %zu on %s at %zu: got %lld want %lld",
                ti->name, o, comm_name, i, (long long)load(ti, recv, i), (long long)want);
        }
        free(send);
        free(recv);
      }
    }
  }
}

static void bcast_every_root(MPI_Comm comm, const char* comm_name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int count = 65537;
  int* data = malloc(count * sizeof(int));
  for (int root = 0; root < size; ++root) {
    for (int i = 0; i < count; ++i)
      data[i] = rank == root ? root * 1000003 + i : -1;
    MPI_Bcast(data, count, MPI_INT, root, comm);
    for (int i = 0; i < count; ++i)
      CHECK(data[i] == root * 1000003 + i, "bcast on %s from %d at %d", comm_name, root, i);
  }
  free(data);
}

/* Several in flight at once, finished by one MPI_Waitall. */
static void nonblocking(MPI_Comm comm, const char* comm_name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { kCalls = 8, kCount = 4099 };
  static double sums[kCalls][kCount];
  static int64_t words[kCalls][kCount];
  MPI_Request requests[2 * kCalls];
  for (int c = 0; c < kCalls; ++c) {
    for (int i = 0; i < kCount; ++i) {
      sums[c][i] = (double)input(rank, (size_t)(i + c));
      words[c][i] = rank == c % size ? (int64_t)c * 7 + i : 0;
    }
    MPI_Iallreduce(MPI_IN_PLACE, sums[c], kCount, MPI_DOUBLE, MPI_SUM, comm, &requests[2 * c]);
    MPI_Ibcast(words[c], kCount, MPI_INT64_T, c % size, comm, &requests[2 * c + 1]);
  }
  MPI_Waitall(2 * kCalls, requests, MPI_STATUSES_IGNORE);
  for (int c = 0; c < kCalls; ++c) {
    for (int i = 0; i < kCount; ++i) {
      CHECK(sums[c][i] == (double)reference(MPI_SUM, size, (size_t)(i + c)),
            "iallreduce %d on %s at %d", c, comm_name, i);
      CHECK(words[c][i] == (int64_t)c * 7 + i, "ibcast %d on %s at %d", c, comm_name, i);
    }
  }
}

static void add_ints(void* in, void* inout, int* count, MPI_Datatype* type) {
  (void)type;
  for (int i = 0; i < *count; ++i)
    ((int*)inout)[i] += ((const int*)in)[i];
}

/* What ibcoll does not take, each a count of its own in the log: a user's op that sums (4243), a
 * predefined op it lacks (LOR, 4244), a predefined type it lacks (long double, 4245). */
static void ops_and_types_it_leaves(MPI_Comm comm, const char* comm_name) {
  int size;
  MPI_Comm_size(comm, &size);
  MPI_Op user_sum;
  MPI_Op_create(add_ints, 1, &user_sum);
  int ints[4244];
  for (int i = 0; i < 4244; ++i)
    ints[i] = i % 2;
  MPI_Allreduce(MPI_IN_PLACE, ints, 4243, MPI_INT, user_sum, comm);
  for (int i = 0; i < 4243; ++i)
    CHECK(ints[i] == i % 2 * size, "user sum on %s at %d", comm_name, i);
  MPI_Op_free(&user_sum);
  MPI_Allreduce(MPI_IN_PLACE, ints, 4244, MPI_INT, MPI_LOR, comm);
  for (int i = 0; i < 4244; ++i)
    CHECK(ints[i] == (i % 2 == 1), "lor on %s at %d", comm_name, i);
  long double* reals = malloc(4245 * sizeof(long double));
  CHECK(reals != NULL, "no memory for the long doubles");
  for (int i = 0; i < 4245; ++i)
    reals[i] = i;
  MPI_Allreduce(MPI_IN_PLACE, reals, 4245, MPI_LONG_DOUBLE, MPI_SUM, comm);
  for (int i = 0; i < 4245; ++i)
    CHECK(reals[i] == (long double)i * size, "long double sum on %s at %d", comm_name, i);
  free(reals);
}

/* MINLOC (count 4242), which ibcoll does not take, and a strided bcast (count 77). */
static void minloc_and_strided(MPI_Comm comm, const char* comm_name) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { kPairs = 4242 };
  struct {
    int value, rank;
  }* pairs = malloc(kPairs * sizeof(*pairs));
  for (int i = 0; i < kPairs; ++i) {
    pairs[i].value = (i + rank) % size;
    pairs[i].rank = rank;
  }
  MPI_Allreduce(MPI_IN_PLACE, pairs, kPairs, MPI_2INT, MPI_MINLOC, comm);
  for (int i = 0; i < kPairs; ++i)
    CHECK(pairs[i].value == 0 && pairs[i].rank == (size - i % size) % size, "minloc on %s at %d",
          comm_name, i);
  free(pairs);
  MPI_Datatype every_other;
  MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  int strided[77 * 4];
  for (int i = 0; i < 77 * 4; ++i)
    strided[i] = rank == 0 ? i : -1;
  MPI_Bcast(strided, 77, every_other, 0, comm);
  /* Element k covers ints 3k and 3k + 2 (two ints, stride 2, extent 3); nothing else moves. */
  for (int i = 0; i < 77 * 4; ++i) {
    const int picked = i < 77 * 3 && i % 3 != 1;
    CHECK(strided[i] == (rank == 0 || picked ? i : -1), "strided bcast on %s at %d", comm_name, i);
  }
  MPI_Type_free(&every_other);
}

static void everything(MPI_Comm comm, const char* name) {
  allreduce_everything(comm, name);
  bcast_every_root(comm, name);
  nonblocking(comm, name);
  minloc_and_strided(comm, name);
  ops_and_types_it_leaves(comm, name);
}

int main(int argc, char** argv) {
  if (argc != 2 || (strcmp(argv[1], "single") && strcmp(argv[1], "multiple"))) {
    fprintf(stderr, "usage: %s single|multiple\n", argv[0]);
    return 2;
  }
  if (!strcmp(argv[1], "single")) {
    MPI_Init(&argc, &argv);
  } else {
    int provided = MPI_THREAD_SINGLE;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided");
  }
  int size;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  everything(MPI_COMM_WORLD, "world");
  MPI_Comm halves, dup;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, size - world_rank, &halves);
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  everything(halves, "split");
  everything(dup, "dup");
  MPI_Comm_free(&halves);
  MPI_Comm_free(&dup);
  if (world_rank == 0)
    printf("collectives_through_component (%s): all results right on %d ranks\n", argv[1], size);
  MPI_Finalize();
  return 0;
}
