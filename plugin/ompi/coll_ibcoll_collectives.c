/* MPI_Allreduce, MPI_Bcast, MPI_Iallreduce and MPI_Ibcast through ibcoll, or through the saved
 * previous module for what ibcoll does not take. Whether ibcoll takes a call depends only on
 * what every rank passes alike (MPI's rules): the op and datatype of an allreduce, the bytes of
 * a bcast. A bcast whose datatype is not contiguous is packed around ibcoll's byte bcast. */
#include "ompi_config.h"

#include <stdint.h>
#include <stdlib.h>

#include "coll_ibcoll.h"
#include "ompi/datatype/ompi_datatype.h"
#include "ompi/op/op.h"
#include "opal/datatype/opal_convertor.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

/* ---- what ibcoll takes ---------------------------------------------------------------------- */

/* The predefined types ibcoll reduces; the one found last is looked at first (a program reduces
 * mostly one or two types), then the table in order, the types programs reduce most first. */
static const struct {
  MPI_Datatype mpi;
  ibcoll_datatype_t ibcoll;
} reducible_types[] = {
    {MPI_FLOAT, IBCOLL_FLOAT32},
    {MPI_DOUBLE, IBCOLL_FLOAT64},
    {MPI_INT, IBCOLL_INT32},
#if SIZEOF_LONG == 8
    {MPI_LONG, IBCOLL_INT64},
    {MPI_UNSIGNED_LONG, IBCOLL_UINT64},
#endif
    {MPI_INT8_T, IBCOLL_INT8},
    {MPI_SIGNED_CHAR, IBCOLL_INT8},
    {MPI_UINT8_T, IBCOLL_UINT8},
    {MPI_UNSIGNED_CHAR, IBCOLL_UINT8},
    {MPI_BYTE, IBCOLL_UINT8},
    {MPI_INT16_T, IBCOLL_INT16},
    {MPI_SHORT, IBCOLL_INT16},
    {MPI_UINT16_T, IBCOLL_UINT16},
    {MPI_UNSIGNED_SHORT, IBCOLL_UINT16},
    {MPI_INT32_T, IBCOLL_INT32},
    {MPI_UINT32_T, IBCOLL_UINT32},
    {MPI_UNSIGNED, IBCOLL_UINT32},
    {MPI_INT64_T, IBCOLL_INT64},
    {MPI_LONG_LONG, IBCOLL_INT64},
    {MPI_UINT64_T, IBCOLL_UINT64},
    {MPI_UNSIGNED_LONG_LONG, IBCOLL_UINT64},
};
enum { REDUCIBLE_TYPES = sizeof(reducible_types) / sizeof(reducible_types[0]) };

static inline bool ibcoll_type_of(struct ompi_datatype_t* type, ibcoll_datatype_t* out) {
  /* Any value a thread reads is an index into the table, so threads need no more than this. */
  static size_t found_last;
  size_t i = __atomic_load_n(&found_last, __ATOMIC_RELAXED);
  if (reducible_types[i].mpi != type) {
    for (i = 0; i < REDUCIBLE_TYPES && reducible_types[i].mpi != type; ++i) {
    }
    if (i == REDUCIBLE_TYPES) return false;
    __atomic_store_n(&found_last, i, __ATOMIC_RELAXED);
  }
  *out = reducible_types[i].ibcoll;
  return true;
}

/* A predefined op's type says which it is; a user's op is never the predefined object. */
static inline bool ibcoll_op_of(struct ompi_op_t* op, ibcoll_op_t* out) {
  static const struct {
    MPI_Op mpi;
    ibcoll_op_t ibcoll;
  } by_type[OMPI_OP_NUM_OF_TYPES] = {
      [OMPI_OP_SUM] = {MPI_SUM, IBCOLL_SUM},    [OMPI_OP_PROD] = {MPI_PROD, IBCOLL_PROD},
      [OMPI_OP_MIN] = {MPI_MIN, IBCOLL_MIN},    [OMPI_OP_MAX] = {MPI_MAX, IBCOLL_MAX},
      [OMPI_OP_BAND] = {MPI_BAND, IBCOLL_BAND}, [OMPI_OP_BOR] = {MPI_BOR, IBCOLL_BOR},
      [OMPI_OP_BXOR] = {MPI_BXOR, IBCOLL_BXOR},
  };
  const unsigned type = (unsigned)op->op_type;
  if (type >= OMPI_OP_NUM_OF_TYPES || by_type[type].mpi != op) return false;
  *out = by_type[type].ibcoll;
  return true;
}

static bool within(size_t bytes, size_t limit) {
  return limit == 0 || bytes <= limit;
}

/* A predefined type and op ibcoll has, at most allreduce_max_bytes: ibcoll's type and op. */
static inline bool reducible(int count, struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                             ibcoll_datatype_t* type, ibcoll_op_t* ibcoll_op) {
  size_t size = 0;
  if (!ibcoll_type_of(dtype, type) || !ibcoll_op_of(op, ibcoll_op)) return false;
  ompi_datatype_type_size(dtype, &size);
  return within(size * (size_t)count, mca_coll_ibcoll_component.allreduce_max_bytes);
}

static bool take_allreduce(const void* sbuf, void* rbuf, int count, struct ompi_datatype_t* dtype,
                           struct ompi_op_t* op, mca_coll_ibcoll_call_t* call) {
  *call = (mca_coll_ibcoll_call_t){.bcast = false,
                                   .mpi_send = sbuf,
                                   .mpi_recv = rbuf,
                                   .mpi_count = count,
                                   .mpi_type = dtype,
                                   .mpi_op = op};
  if (!reducible(count, dtype, op, &call->type, &call->op)) return false;
  call->send = sbuf == MPI_IN_PLACE ? IBCOLL_IN_PLACE : sbuf;
  call->recv = rbuf;
  call->count = (size_t)count;
  return true;
}

/* Any datatype, by its bytes (type size × count: what the root and every other rank agree on,
 * whatever their layouts), at most bcast_max_bytes. */
static bool take_bcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                       mca_coll_ibcoll_call_t* call) {
  size_t size = 0;
  ompi_datatype_type_size(dtype, &size);
  /* Field by field: a blocking bcast pays for every store here, and zeroing the whole struct
   * first (a compound literal) cost it more than the rest of its checks. */
  call->bcast = true;
  call->send = NULL;
  call->recv = buf;
  call->count = size * (size_t)count;
  call->type = IBCOLL_UINT8;
  call->op = IBCOLL_SUM;
  call->packed = NULL;
  call->unpackable = false;
  call->mpi_send = NULL;
  call->mpi_recv = buf;
  call->mpi_count = count;
  call->mpi_type = dtype;
  call->mpi_op = NULL;
  call->root = root;
  return within(call->count, mca_coll_ibcoll_component.bcast_max_bytes);
}

/* Between the caller's layout and `bytes` packed bytes; false if the convertor fails. */
static bool convert(bool pack, void* user, int count, struct ompi_datatype_t* dtype, void* packed,
                    size_t bytes) {
  opal_convertor_t convertor;
  OBJ_CONSTRUCT(&convertor, opal_convertor_t);
  int32_t rc =
      pack ? opal_convertor_copy_and_prepare_for_send(ompi_mpi_local_convertor, &dtype->super,
                                                      (size_t)count, user, 0, &convertor)
           : opal_convertor_copy_and_prepare_for_recv(ompi_mpi_local_convertor, &dtype->super,
                                                      (size_t)count, user, 0, &convertor);
  struct iovec iov = {.iov_base = packed, .iov_len = bytes};
  uint32_t iov_count = 1;
  size_t moved = bytes;
  if (rc == OPAL_SUCCESS) {
    rc = pack ? opal_convertor_pack(&convertor, &iov, &iov_count, &moved)
              : opal_convertor_unpack(&convertor, &iov, &iov_count, &moved);
  }
  OBJ_DESTRUCT(&convertor);
  return rc >= 0 && moved == bytes;
}

/* A bcast whose datatype is not contiguous: its bytes in call->packed (filled at the root);
 * without memory for that, nowhere (an unpackable call, joining as an empty one). */
static void pack_bcast(mca_coll_ibcoll_call_t* call, int rank) {
  call->packed = malloc(call->count ? call->count : 1);
  if (call->packed && (rank != call->root || convert(true, call->mpi_recv, call->mpi_count,
                                                     call->mpi_type, call->packed, call->count))) {
    call->recv = call->packed;
    return;
  }
  free(call->packed);
  call->packed = NULL;
  static char nothing;
  call->recv = &nothing;
  call->count = 0;
  call->unpackable = true;
}

/* Where a bcast's bytes lie: in the caller's buffer (from its true lower bound) when the layout
 * is contiguous, else packed (above). */
static inline void lay_out_bcast(mca_coll_ibcoll_call_t* call, ompi_communicator_t* comm) {
  if (!ompi_datatype_is_contiguous_memory_layout(call->mpi_type, call->mpi_count)) {
    pack_bcast(call, ompi_comm_rank(comm));
    return;
  }
  ptrdiff_t true_lb = 0, true_extent = 0;
  ompi_datatype_get_true_extent(call->mpi_type, &true_lb, &true_extent);
  call->recv = (char*)call->mpi_recv + true_lb;
}

int mca_coll_ibcoll_bcast_outcome(const mca_coll_ibcoll_call_t* call, ibcoll_status_t status,
                                  const char* name, ompi_communicator_t* comm) {
  if (!call->unpackable) return mca_coll_ibcoll_outcome(status, name, comm);
  opal_output(0, "coll:ibcoll: %s on %s failed: no memory to pack its datatype's bytes into", name,
              comm->c_name);
  return MPI_ERR_NO_MEM;
}

int mca_coll_ibcoll_unpack(const mca_coll_ibcoll_call_t* call, int rank, const char* name,
                           ompi_communicator_t* comm) {
  if (!call->packed || rank == call->root ||
      convert(false, call->mpi_recv, call->mpi_count, call->mpi_type, call->packed, call->count)) {
    return MPI_SUCCESS;
  }
  opal_output(0, "coll:ibcoll: %s on %s failed: cannot unpack into the caller's datatype", name,
              comm->c_name);
  return MPI_ERR_INTERN;
}

/* ---- outcomes -------------------------------------------------------------------------------- */

static int mpi_error_of(ibcoll_status_t status) {
  switch (status) {
    case IBCOLL_SUCCESS:
      return MPI_SUCCESS;
    case IBCOLL_ERR_INVALID_ARGUMENT:
      return MPI_ERR_ARG;
    case IBCOLL_ERR_TRUNCATED:
      return MPI_ERR_TRUNCATE;
    default:
      return MPI_ERR_OTHER;
  }
}

int mca_coll_ibcoll_outcome(ibcoll_status_t status, const char* call, ompi_communicator_t* comm) {
  if (status != IBCOLL_SUCCESS) {
    opal_output(0, "coll:ibcoll: %s on %s failed: %s", call, comm->c_name, ibcoll_last_error());
  }
  return mpi_error_of(status);
}

/* What ibcoll runs, for the log: a bcast of bytes, or an allreduce of elements of a type. */
typedef struct {
  ibcoll_collective_t collective;
  size_t count;
  ibcoll_datatype_t type;
} ibcoll_run_t;

static ibcoll_run_t run_of(const mca_coll_ibcoll_call_t* c) {
  return (ibcoll_run_t){c->bcast ? IBCOLL_BCAST : IBCOLL_ALLREDUCE, c->count,
                        c->bcast ? IBCOLL_UINT8 : c->type};
}

/* At verbosity 10, who ran a call: "fallback", "ibcoll", or for a call ibcoll runs now on `ic`,
 * "ibcoll (ALGORITHM)" (the one it chose). */
static void log_call(const char* call, bool ibcoll, ompi_communicator_t* comm, int count,
                     ibcoll_comm_t ic, ibcoll_run_t run) {
  const char* algorithm = ic ? ibcoll_algorithm(ic, run.collective, run.count, run.type) : NULL;
  opal_output_verbose(10, mca_coll_ibcoll_component.output, "coll:ibcoll: %s of %d on %s: %s%s%s%s",
                      call, count, comm->c_name, ibcoll ? "ibcoll" : "fallback",
                      algorithm ? " (" : "", algorithm ? algorithm : "", algorithm ? ")" : "");
}

/* Counts a call that goes its way, and logs it (above). */
static inline void note(const char* call, bool ibcoll, unsigned long* counter,
                        ompi_communicator_t* comm, int count, ibcoll_comm_t ic, ibcoll_run_t run) {
  if (ibcoll) {
    ++*counter; /* a call ibcoll takes holds the lock */
  } else {
    mca_coll_ibcoll_count_fallback();
  }
  if (mca_coll_ibcoll_component.verbose >= 10) log_call(call, ibcoll, comm, count, ic, run);
}

/* ---- blocking -------------------------------------------------------------------------------- */

/* The module's ibcoll communicator for a blocking call, with the lock held, once its mapping
 * has ended and every call queued before this one has started (Open MPI's progress runs
 * meanwhile); NULL, unlocked, when the communicator falls back. */
static inline ibcoll_comm_t comm_for_blocking_call(mca_coll_ibcoll_module_t* m) {
  for (;;) {
    mca_coll_ibcoll_lock();
    if (m->mapping == IBCOLL_MAPPED && !m->queued) return m->ibcoll_comm; /* nothing to settle */
    mca_coll_ibcoll_settle(m);
    if (m->mapping == IBCOLL_MAPPED) return m->ibcoll_comm;
    const bool agreeing = m->mapping == IBCOLL_AGREEING;
    mca_coll_ibcoll_unlock();
    if (!agreeing) return NULL;
    opal_progress();
  }
}

int mca_coll_ibcoll_allreduce(const void* sbuf, void* rbuf, int count,
                              struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                              struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  ibcoll_datatype_t type = IBCOLL_UINT8;
  ibcoll_op_t ibcoll_op = IBCOLL_SUM;
  ibcoll_comm_t ic =
      reducible(count, dtype, op, &type, &ibcoll_op) ? comm_for_blocking_call(m) : NULL;
  note("MPI_Allreduce", ic != NULL, &mca_coll_ibcoll_component.counters.allreduce, comm, count, ic,
       (ibcoll_run_t){IBCOLL_ALLREDUCE, (size_t)count, type});
  if (!ic) {
    return m->previous_allreduce(sbuf, rbuf, count, dtype, op, comm, m->previous_allreduce_module);
  }
  const ibcoll_status_t s = ibcoll_allreduce(sbuf == MPI_IN_PLACE ? IBCOLL_IN_PLACE : sbuf, rbuf,
                                             (size_t)count, type, ibcoll_op, ic);
  mca_coll_ibcoll_unlock();
  return mca_coll_ibcoll_outcome(s, "MPI_Allreduce", comm);
}

int mca_coll_ibcoll_bcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                          struct ompi_communicator_t* comm, mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  mca_coll_ibcoll_call_t c;
  const bool taken = take_bcast(buf, count, dtype, root, &c);
  if (taken) lay_out_bcast(&c, comm); /* a root's packing takes long: not under the lock */
  ibcoll_comm_t ic = taken ? comm_for_blocking_call(m) : NULL;
  note("MPI_Bcast", ic != NULL, &mca_coll_ibcoll_component.counters.bcast, comm, count, ic,
       run_of(&c));
  if (!ic) {
    free(c.packed);
    return m->previous_bcast(buf, count, dtype, root, comm, m->previous_bcast_module);
  }
  const ibcoll_status_t s = ibcoll_bcast(c.recv, c.count, IBCOLL_UINT8, root, ic);
  mca_coll_ibcoll_unlock();
  int rc = mca_coll_ibcoll_bcast_outcome(&c, s, "MPI_Bcast", comm);
  if (!c.packed) return rc;
  if (rc == MPI_SUCCESS) rc = mca_coll_ibcoll_unpack(&c, ompi_comm_rank(comm), "MPI_Bcast", comm);
  free(c.packed);
  return rc;
}

/* ---- non-blocking ---------------------------------------------------------------------------- */

/* A taken call as a request (queued while the communicator is being mapped), or, once the
 * communicator is known unusable, NULL: then the caller falls back. Locked inside. */
static bool start_taken(mca_coll_ibcoll_module_t* m, mca_coll_ibcoll_call_t* c, const char* name,
                        unsigned long* counter, ompi_request_t** request, int* rc) {
  mca_coll_ibcoll_lock();
  mca_coll_ibcoll_settle(m);
  const bool taken = m->mapping != IBCOLL_UNUSABLE;
  if (taken) {
    note(name, true, counter, m->comm, c->mpi_count,
         m->mapping == IBCOLL_MAPPED ? m->ibcoll_comm : NULL, run_of(c));
    *rc = mca_coll_ibcoll_request_start(m, c, request);
  }
  mca_coll_ibcoll_unlock();
  return taken;
}

int mca_coll_ibcoll_iallreduce(const void* sbuf, void* rbuf, int count,
                               struct ompi_datatype_t* dtype, struct ompi_op_t* op,
                               struct ompi_communicator_t* comm, ompi_request_t** request,
                               mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  mca_coll_ibcoll_call_t c;
  int rc = MPI_SUCCESS;
  if (take_allreduce(sbuf, rbuf, count, dtype, op, &c) &&
      start_taken(m, &c, "MPI_Iallreduce", &mca_coll_ibcoll_component.counters.iallreduce, request,
                  &rc)) {
    return rc;
  }
  note("MPI_Iallreduce", false, NULL, comm, count, NULL, (ibcoll_run_t){0});
  return m->previous_iallreduce(sbuf, rbuf, count, dtype, op, comm, request,
                                m->previous_iallreduce_module);
}

int mca_coll_ibcoll_ibcast(void* buf, int count, struct ompi_datatype_t* dtype, int root,
                           struct ompi_communicator_t* comm, ompi_request_t** request,
                           mca_coll_base_module_t* module) {
  mca_coll_ibcoll_module_t* m = (mca_coll_ibcoll_module_t*)module;
  mca_coll_ibcoll_call_t c;
  int rc = MPI_SUCCESS;
  if (take_bcast(buf, count, dtype, root, &c)) {
    lay_out_bcast(&c, comm); /* a root's packing takes long: not under the lock */
    if (start_taken(m, &c, "MPI_Ibcast", &mca_coll_ibcoll_component.counters.ibcast, request,
                    &rc)) {
      return rc;
    }
    free(c.packed);
  }
  note("MPI_Ibcast", false, NULL, comm, count, NULL, (ibcoll_run_t){0});
  return m->previous_ibcast(buf, count, dtype, root, comm, request, m->previous_ibcast_module);
}
