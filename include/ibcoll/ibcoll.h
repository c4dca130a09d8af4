/* ibcoll: MPI-style collectives (allreduce, broadcast) over verbs and shared memory.
 *
 * Every call returns an ibcoll_status_t and never throws or aborts; on failure
 * ibcoll_last_error() says what went wrong, naming the argument or the peer at fault. A call
 * that fails on bad arguments changes nothing. Collective calls must be made by every rank of
 * the communicator in the same order; ranks that disagree (count, type, op, root) all get
 * IBCOLL_ERR_MISMATCH. In a small bcast between ranks of one node, which waits for the root
 * alone, a rank whose call matched its root's gets it from its next call on that communicator
 * instead (which has run in full; the message says the mismatch was in the call before).
 * Blocking calls and ibcoll_wait end after IBCOLL_TIMEOUT at the latest (10 minutes by default,
 * 0 for none), with an error naming the call and the rank(s) it still waits for; a dead peer
 * fails them long before. SIGUSR1 makes the process write what its calls in flight wait for
 * (IBCOLL_HANG_REPORT, else stderr).
 * Not thread-safe: one thread per context at a time. */
#ifndef IBCOLL_IBCOLL_H
#define IBCOLL_IBCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif
#pragma GCC visibility push(default) /* the library hides everything but this API */

#define IBCOLL_VERSION_MAJOR 0
#define IBCOLL_VERSION_MINOR 2

typedef enum {
  IBCOLL_SUCCESS = 0,
  IBCOLL_ERR_INVALID_ARGUMENT, /* the message names the argument */
  IBCOLL_ERR_NOT_SUPPORTED,    /* the build or device lacks a capability asked for */
  IBCOLL_ERR_SYSTEM,           /* an OS or verbs call failed */
  IBCOLL_ERR_TIMEOUT,          /* IBCOLL_TIMEOUT passed */
  IBCOLL_ERR_PEER_FAILED,      /* a peer died or its connection broke */
  IBCOLL_ERR_TRUNCATED,        /* a message was longer than its buffer */
  IBCOLL_ERR_MISMATCH,         /* ranks made different calls */
  IBCOLL_ERR_INTERNAL,
  IBCOLL_ERR_REVOKED, /* the communicator was revoked (ibcoll_comm_revoke) */
  IBCOLL_ERR_FENCED   /* the other ranks declared this one failed (it was silent too long in an
                         agreement, or cut off): its calls fail; it may only finalize */
} ibcoll_status_t;

/* Types, ops and collectives travel as int so that any value a caller passes can be checked
 * (and refused) rather than being undefined. */
enum ibcoll_datatype {
  IBCOLL_INT8,
  IBCOLL_INT16,
  IBCOLL_INT32,
  IBCOLL_INT64,
  IBCOLL_UINT8,
  IBCOLL_UINT16,
  IBCOLL_UINT32,
  IBCOLL_UINT64,
  IBCOLL_FLOAT16, /* IEEE 754 binary16 */
  IBCOLL_BFLOAT16,
  IBCOLL_FLOAT32,
  IBCOLL_FLOAT64
};
typedef int ibcoll_datatype_t; /* an enum ibcoll_datatype */

enum ibcoll_op {
  IBCOLL_SUM,
  IBCOLL_PROD,
  IBCOLL_MIN,
  IBCOLL_MAX,
  IBCOLL_BAND, /* integers only */
  IBCOLL_BOR,  /* integers only */
  IBCOLL_BXOR  /* integers only */
};
typedef int ibcoll_op_t; /* an enum ibcoll_op */

enum ibcoll_collective { IBCOLL_ALLREDUCE, IBCOLL_BCAST };
typedef int ibcoll_collective_t; /* an enum ibcoll_collective */

/* As the send buffer of an allreduce: the input is in the receive buffer. */
#ifdef __cplusplus
#define IBCOLL_IN_PLACE (reinterpret_cast<const void*>(1))
#else
#define IBCOLL_IN_PLACE ((const void*)1)
#endif
/* As the color of ibcoll_comm_split: this rank joins no new communicator. */
#define IBCOLL_UNDEFINED (-1)

/* Handles. Every call checks the handles it is given against those alive: a freed, finalized
 * or never-made one is refused with IBCOLL_ERR_INVALID_ARGUMENT naming the argument (unless its
 * address has since been reused for a new handle of the same kind). */
typedef struct ibcoll_context* ibcoll_context_t;
typedef struct ibcoll_comm* ibcoll_comm_t;
typedef struct ibcoll_request* ibcoll_request_t;

/* The message of the last failed call on this thread (empty if none); valid until the next
 * failing call on this thread. */
const char* ibcoll_last_error(void);
const char* ibcoll_status_name(ibcoll_status_t status);

/* Joins the job described by the environment (IBCOLL_* and the launcher's variables) and opens
 * the transports. Collective over every rank of the job. */
ibcoll_status_t ibcoll_init(ibcoll_context_t* context);
/* How a caller that already connects the ranks (an MPI library) bootstraps ibcoll instead of
 * through the environment: `allgather` gathers `bytes` from every rank into `all` (size * bytes,
 * in rank order), collectively over every rank of the job; it returns 0 on success. It is called
 * during ibcoll_init_with and ibcoll_finalize only. Configuration still comes from IBCOLL_*. */
typedef struct ibcoll_bootstrap {
  int rank;
  int size;
  int (*allgather)(const void* mine, void* all, size_t bytes, void* state);
  void* state;
} ibcoll_bootstrap_t;
ibcoll_status_t ibcoll_init_with(const ibcoll_bootstrap_t* bootstrap, ibcoll_context_t* context);
/* Collective over every rank. Communicators and requests of the context must be freed first. */
ibcoll_status_t ibcoll_finalize(ibcoll_context_t context);
/* Polls the transports once and advances every call in flight. */
ibcoll_status_t ibcoll_progress(ibcoll_context_t context);

/* A function that every progress call and every wait of the context also calls (NULL: none),
 * so that a host library's own communication keeps moving while ibcoll waits; it returns how
 * many events it handled. The Open MPI component passes opal_progress. */
ibcoll_status_t ibcoll_set_external_progress(ibcoll_context_t context, int (*poll)(void* state),
                                             void* state);

/* Every rank of the job; owned by the context (do not free). */
ibcoll_status_t ibcoll_comm_world(ibcoll_context_t context, ibcoll_comm_t* comm);
ibcoll_status_t ibcoll_comm_rank(ibcoll_comm_t comm, int* rank);
ibcoll_status_t ibcoll_comm_size(ibcoll_comm_t comm, int* size);
/* Collective over `parent`: ranks passing the same color (>= 0) form a communicator ordered by
 * key, then parent rank. With IBCOLL_UNDEFINED, *comm is set to NULL. */
ibcoll_status_t ibcoll_comm_split(ibcoll_comm_t parent, int color, int key, ibcoll_comm_t* comm);
/* Collective over `parent`, every rank passing the same list: the listed parent ranks form a
 * communicator in list order; elsewhere *comm is set to NULL. */
ibcoll_status_t ibcoll_comm_create(ibcoll_comm_t parent, const int* ranks, int count,
                                   ibcoll_comm_t* comm);
/* For a caller that agrees on its communicators by its own means (an MPI library). An id
 * (2..65535; IBCOLL_COMM_IDS) names one live communicator of a process, and is free again once
 * that is freed;
 * a stamp keeps a communicator apart from earlier ones with its id (their late messages, what
 * they still hold on a node). ibcoll_comm_next_id: above every id this process holds (so the
 * members' maximum is free on every member, unless past the last id). ibcoll_comm_id_free: whether
 * no communicator of this process holds `id`. ibcoll_comm_stamp: this process's stamp, once
 * it has seen `seen` (the stamp of an agreement that ended, taken or not; 0: none); the
 * members' maximum is the new communicator's. ibcoll_comm_from_ranks, not collective: the
 * communicator of the listed job ranks (this one among them, in communicator order) with `id`
 * and `stamp`, which every member passes alike: an id free on every member, and the members'
 * largest stamp. */
ibcoll_status_t ibcoll_comm_next_id(ibcoll_context_t context, unsigned* id);
ibcoll_status_t ibcoll_comm_id_free(ibcoll_context_t context, unsigned id, int* is_free);
ibcoll_status_t ibcoll_comm_stamp(ibcoll_context_t context, uint64_t seen, uint64_t* stamp);
ibcoll_status_t ibcoll_comm_from_ranks(ibcoll_context_t context, const int* ranks, int count,
                                       unsigned id, uint64_t stamp, ibcoll_comm_t* comm);
/* ibcoll_comm_from_ranks with the ranks of `like`, in its order (an MPI library's duplicate):
 * the new communicator shares what `like` knows of its members, so making it costs nothing that
 * grows with them; `like` may be freed first. */
ibcoll_status_t ibcoll_comm_like(ibcoll_comm_t like, unsigned id, uint64_t stamp,
                                 ibcoll_comm_t* comm);
/* Frees a communicator from split/create/from_ranks/like (not the world) and sets *comm to NULL.
 * It first lets this rank's last bcast on it end, if that returned early (see ibcoll_bcast):
 * that call's failure, if any, is what this returns (the communicator is freed either way). */
ibcoll_status_t ibcoll_comm_free(ibcoll_comm_t* comm);
/* ibcoll_comm_free for a communicator from ibcoll_comm_from_ranks that not every member made
 * (their agreement gave it up): the members of this node that did not make it never will, so
 * what those that did share on the node is let go once they have. */
ibcoll_status_t ibcoll_comm_abandon(ibcoll_comm_t* comm);
/* Revokes `comm` for every member, not collective: each member's calls on it, those in flight
 * and every later one, fail with IBCOLL_ERR_REVOKED within seconds, also members that the
 * caller does not talk to (the word spreads from member to member, around failed ones). It
 * returns once its word has left this process, or after one IBCOLL_KEEPALIVE interval (the
 * word to a partner outside the library all that time goes with this rank's later calls). Free it
 * with ibcoll_comm_free (the world: ibcoll_finalize). Revoking it again does nothing. */
ibcoll_status_t ibcoll_comm_revoke(ibcoll_comm_t comm);
/* A fault-tolerant agreement, collective over the live members of `comm` (revoked or not), that
 * completes however many members fail during it: *flags becomes the bitwise AND of the flags of
 * the members it counts, and every member it returns on gets the same value and the same set of
 * failed members (ibcoll_comm_failed_ranks). IBCOLL_SUCCESS when that set is empty;
 * IBCOLL_ERR_PEER_FAILED, *flags agreed all the same, when it holds members (the message names
 * them). A member silent for IBCOLL_TIMEOUT while another waits on it there is fenced out:
 * declared failed, and told so (its calls fail with IBCOLL_ERR_FENCED). A member may return
 * before others have the answer, and gives it on from its later calls into ibcoll: it should
 * not leave the library for longer than IBCOLL_TIMEOUT before the others are done. */
ibcoll_status_t ibcoll_comm_agree(ibcoll_comm_t comm, int* flags);
/* The members of `comm` that its last agreement (ibcoll_comm_agree or ibcoll_comm_shrink) held
 * failed, as ranks of `comm` in order, the same on every member: the first `capacity` into
 * `ranks`, how many in *count. None before any agreement. */
ibcoll_status_t ibcoll_comm_failed_ranks(ibcoll_comm_t comm, int* ranks, int capacity, int* count);
/* Collective over the live members of `comm` (revoked or not): they agree on who failed, as
 * ibcoll_comm_agree does (a failure during it is survived the same way), and *newcomm becomes a
 * communicator of the others, in their order in `comm`, for every collective and algorithm; the
 * connections that are still good serve it. `comm` stays, to be freed (ibcoll_comm_free). */
ibcoll_status_t ibcoll_comm_shrink(ibcoll_comm_t comm, ibcoll_comm_t* newcomm);

/* recv = send[rank 0] op send[rank 1] op ...: the same bits on every rank. `send` may equal
 * `recv` or be IBCOLL_IN_PLACE. count 0 is a no-op (still a collective call). */
ibcoll_status_t ibcoll_allreduce(const void* send, void* recv, size_t count, ibcoll_datatype_t type,
                                 ibcoll_op_t op, ibcoll_comm_t comm);
/* Copies root's `buffer` into every rank's. The root of a small one may return once its data
 * is sent, before every rank is heard from; a mismatch or failure found after that is reported
 * by its next call on the communicator (or ibcoll_comm_free), as "this rank's call before this
 * one ... failed". */
ibcoll_status_t ibcoll_bcast(void* buffer, size_t count, ibcoll_datatype_t type, int root,
                             ibcoll_comm_t comm);

/* Non-blocking forms: buffers must stay untouched until the request completes. */
ibcoll_status_t ibcoll_iallreduce(const void* send, void* recv, size_t count,
                                  ibcoll_datatype_t type, ibcoll_op_t op, ibcoll_comm_t comm,
                                  ibcoll_request_t* request);
ibcoll_status_t ibcoll_ibcast(void* buffer, size_t count, ibcoll_datatype_t type, int root,
                              ibcoll_comm_t comm, ibcoll_request_t* request);
/* Advances everything in flight; *done = 1 once the request has ended (its outcome is the
 * return value then). */
ibcoll_status_t ibcoll_test(ibcoll_request_t request, int* done);
/* Until the request ends (at most IBCOLL_TIMEOUT); returns its outcome. */
ibcoll_status_t ibcoll_wait(ibcoll_request_t request);
/* Frees an ended request and sets *request to NULL. A request still running is first waited
 * for. */
ibcoll_status_t ibcoll_request_free(ibcoll_request_t* request);

/* The name of the algorithm a call of `count` elements of `type` on `comm` would use (static
 * storage), or NULL with the error set. */
const char* ibcoll_algorithm(ibcoll_comm_t comm, ibcoll_collective_t collective, size_t count,
                             ibcoll_datatype_t type);
/* "shm", "verbs", "ucx" or "self": the transport between this process and `rank` of `comm`. */
const char* ibcoll_transport(ibcoll_comm_t comm, int rank);
/* What this process's transports have done since ibcoll_init: which carried the collectives'
 * messages, and how many peers verbs connected to (connections are made on demand, so they
 * follow the algorithms: with hierarchical ones, a rank connects only to its leaders' and
 * rails' partners on other nodes, and to those of the call check). */
typedef struct {
  uint64_t verbs_connections; /* RC connections made with other processes */
  uint64_t verbs_messages_sent, verbs_bytes_sent;
  uint64_t shm_messages_sent, shm_bytes_sent;
  /* This node's shared segment: its size (address space; its file is sparse) and the bytes the
   * kernel holds for it now (rings of the pairs that have talked, slot sets in use). 0 without
   * shared memory. */
  uint64_t shm_segment_bytes, shm_resident_bytes;
  /* UCX (where it carries messages instead of verbs): endpoints made, and what went by it. */
  uint64_t ucx_endpoints;
  uint64_t ucx_messages_sent, ucx_bytes_sent;
} ibcoll_counters_t;
ibcoll_status_t ibcoll_get_counters(ibcoll_context_t context, ibcoll_counters_t* counters);
/* The thresholds this process runs with that the machine decides, a line each, as
 * "VARIABLE=value (where the value came from)": e.g. IBCOLL_SHM_SINGLE_COPY, measured between
 * two ranks of the node at start-up unless set. Owned by the context; NULL on a bad argument. */
const char* ibcoll_thresholds(ibcoll_context_t context);
/* The ranks of `comm` in the order ring and chain algorithms pass data (node by node, the
 * ranks of one package together): `order` gets ibcoll_comm_size() entries. */
ibcoll_status_t ibcoll_ring_order(ibcoll_comm_t comm, int* order);

#pragma GCC visibility pop
#ifdef __cplusplus
}
#endif

#endif /* IBCOLL_IBCOLL_H */
