// The C API over runtime::Context: argument checks at the boundary (C enums arrive as any int),
// every exception turned into a status code plus a thread-local message.
#include "ibcoll/ibcoll.h"

#include <algorithm>
#include <memory>
#include <new>
#include <string>

#include "plugin/capi/live_handles.h"
#include "runtime/bootstrap/callback_bootstrap.h"
#include "runtime/context.h"

using ibcoll::Code;
using ibcoll::Error;
using ibcoll::Status;
using ibcoll::collectives::Collective;
using ibcoll::collectives::CollectiveArgs;
using ibcoll::collectives::Communicator;
using ibcoll::collectives::DataType;
using ibcoll::collectives::ReduceOp;

struct ibcoll_context {
  std::unique_ptr<ibcoll::runtime::Context> context;
  std::unique_ptr<ibcoll_comm> world;
  int open_comms = 0, open_requests = 0;
};

struct ibcoll_comm {
  ibcoll_context* owner;
  Communicator* communicator;
  std::unique_ptr<Communicator> owned;  // null for the world
};

struct ibcoll_request {
  ibcoll_context* owner;
  std::unique_ptr<ibcoll::runtime::Request> request;
};

// The C values are the engine's enumerators, in the same order.
static_assert(static_cast<int>(DataType::int8) == IBCOLL_INT8 &&
              static_cast<int>(DataType::uint64) == IBCOLL_UINT64 &&
              static_cast<int>(DataType::float16) == IBCOLL_FLOAT16 &&
              static_cast<int>(DataType::float64) == IBCOLL_FLOAT64 &&
              ibcoll::collectives::kDataTypeCount == IBCOLL_FLOAT64 + 1);
static_assert(static_cast<int>(ReduceOp::sum) == IBCOLL_SUM &&
              static_cast<int>(ReduceOp::max) == IBCOLL_MAX &&
              static_cast<int>(ReduceOp::bxor) == IBCOLL_BXOR &&
              ibcoll::collectives::kReduceOpCount == IBCOLL_BXOR + 1);

namespace {

thread_local std::string last_error;

ibcoll_status_t to_c(Code code) {
  switch (code) {
    case Code::ok:
      return IBCOLL_SUCCESS;
    case Code::invalid_argument:
      return IBCOLL_ERR_INVALID_ARGUMENT;
    case Code::not_supported:
      return IBCOLL_ERR_NOT_SUPPORTED;
    case Code::system_error:
      return IBCOLL_ERR_SYSTEM;
    case Code::timeout:
      return IBCOLL_ERR_TIMEOUT;
    case Code::peer_failed:
      return IBCOLL_ERR_PEER_FAILED;
    case Code::truncated:
      return IBCOLL_ERR_TRUNCATED;
    case Code::mismatch:
      return IBCOLL_ERR_MISMATCH;
    case Code::internal:
      break;
    case Code::revoked:
      return IBCOLL_ERR_REVOKED;
    case Code::fenced:
      return IBCOLL_ERR_FENCED;
  }
  return IBCOLL_ERR_INTERNAL;
}

ibcoll_status_t report(const Status& status) {
  if (!status.ok()) last_error = status.message();
  return to_c(status.code());
}

// Runs `body`, turning whatever it throws into a status and the thread's last error.
template <typename Body>
ibcoll_status_t guarded(Body&& body) noexcept {
  try {
    return report(body());
  } catch (const Error& e) {
    return report(e.status());
  } catch (const std::bad_alloc&) {
    return report(Status(Code::system_error, "out of memory"));
  } catch (const std::exception& e) {
    return report(Status(Code::internal, e.what()));
  }
}

[[noreturn]] void invalid(const std::string& message) {
  throw Error(Code::invalid_argument, message);
}

template <typename T>
void require(const T* pointer, const char* name) {
  if (!pointer) invalid(std::string(name) + ": null");
}

// Handles are checked against those that exist, so a stale or foreign pointer is not followed.
// Never destroyed: a finalize may come from another library's destructor at exit, after this
// library's static objects are gone.
LiveHandles<ibcoll_context>& live_contexts = *new LiveHandles<ibcoll_context>;
LiveHandles<ibcoll_comm>& live_comms = *new LiveHandles<ibcoll_comm>;
LiveHandles<ibcoll_request>& live_requests = *new LiveHandles<ibcoll_request>;

std::string not_live(const char* name, const char* kind) {
  return std::string(name) + ": not a live " + kind +
         " (freed, finalized, or never made by ibcoll)";
}

// `handle`, if it is a live one of its kind; else an error naming the argument `name`.
template <typename Handle>
Handle* require_live(Handle* handle, const LiveHandles<Handle>& live, const char* name,
                     const char* kind) {
  require(handle, name);
  if (!live.contains(handle)) invalid(not_live(name, kind));
  return handle;
}
ibcoll_context* live(ibcoll_context_t context, const char* name = "context") {
  return require_live(context, live_contexts, name, "ibcoll_context_t");
}
ibcoll_comm* live(ibcoll_comm_t comm, const char* name = "comm") {
  return require_live(comm, live_comms, name, "ibcoll_comm_t");
}
ibcoll_request* live(ibcoll_request_t request, const char* name = "request") {
  return require_live(request, live_requests, name, "ibcoll_request_t");
}

DataType data_type(ibcoll_datatype_t type) {
  const int value = type;
  if (value < 0 || value >= ibcoll::collectives::kDataTypeCount) {
    invalid("type: " + std::to_string(value) + " is not an ibcoll_datatype_t");
  }
  return static_cast<DataType>(value);
}

ReduceOp reduce_op(ibcoll_op_t op) {
  const int value = op;
  if (value < 0 || value >= ibcoll::collectives::kReduceOpCount) {
    invalid("op: " + std::to_string(value) + " is not an ibcoll_op_t");
  }
  return static_cast<ReduceOp>(value);
}

Collective collective_of(ibcoll_collective_t collective) {
  if (collective == IBCOLL_ALLREDUCE) return Collective::allreduce;
  if (collective == IBCOLL_BCAST) return Collective::bcast;
  invalid("collective: " + std::to_string(collective) + " is not an ibcoll_collective_t");
}

CollectiveArgs allreduce_args(const void* send, void* recv, size_t count, ibcoll_datatype_t type,
                              ibcoll_op_t op) {
  return {send == IBCOLL_IN_PLACE ? recv : send, recv, count, data_type(type), reduce_op(op), 0};
}

CollectiveArgs bcast_args(void* buffer, size_t count, ibcoll_datatype_t type, int root) {
  return {buffer, buffer, count, data_type(type), ReduceOp::sum, root};
}

ibcoll_comm* adopt(ibcoll_context* owner, std::unique_ptr<Communicator> communicator) {
  if (!communicator) return nullptr;
  Communicator* const made = communicator.get();
  std::unique_ptr<ibcoll_comm> handle;
  try {
    handle.reset(new ibcoll_comm{owner, made, std::move(communicator)});
    live_comms.add(handle.get());
  } catch (...) {  // its id goes back with it
    owner->context->release(*made);
    throw;
  }
  ++owner->open_comms;
  return handle.release();
}

// Starts a call and hands out its request.
Status start(ibcoll_comm_t comm, Collective collective, const CollectiveArgs& args,
             ibcoll_request_t* request) {
  auto running = comm->owner->context->start(*comm->communicator, collective, args);
  auto handle = std::make_unique<ibcoll_request>(ibcoll_request{comm->owner, std::move(running)});
  live_requests.add(handle.get());
  ++comm->owner->open_requests;
  *request = handle.release();
  return {};
}

// Runs a call to its end.
Status run(ibcoll_comm_t comm, Collective collective, const CollectiveArgs& args) {
  return comm->owner->context->run(*comm->communicator, collective, args);
}

// A context made: its world made and both registered as live.
ibcoll_context* publish(std::unique_ptr<ibcoll_context> created) {
  created->world = std::make_unique<ibcoll_comm>(
      ibcoll_comm{created.get(), &created->context->world(), nullptr});
  live_comms.add(created->world.get());
  try {
    live_contexts.add(created.get());
  } catch (...) {
    live_comms.remove(created->world.get());
    throw;
  }
  return created.release();
}

}  // namespace

extern "C" {

const char* ibcoll_last_error(void) {
  return last_error.c_str();
}

const char* ibcoll_status_name(ibcoll_status_t status) {
  switch (status) {
    case IBCOLL_SUCCESS:
      return "success";
    case IBCOLL_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case IBCOLL_ERR_NOT_SUPPORTED:
      return "not supported";
    case IBCOLL_ERR_SYSTEM:
      return "system error";
    case IBCOLL_ERR_TIMEOUT:
      return "timeout";
    case IBCOLL_ERR_PEER_FAILED:
      return "peer failed";
    case IBCOLL_ERR_TRUNCATED:
      return "truncated";
    case IBCOLL_ERR_MISMATCH:
      return "mismatch";
    case IBCOLL_ERR_INTERNAL:
      return "internal error";
    case IBCOLL_ERR_REVOKED:
      return "revoked";
    case IBCOLL_ERR_FENCED:
      return "fenced";
  }
  return "unknown status";
}

ibcoll_status_t ibcoll_init(ibcoll_context_t* context) {
  return guarded([&] {
    require(context, "context");
    auto created = std::make_unique<ibcoll_context>();
    created->context = std::make_unique<ibcoll::runtime::Context>();
    *context = publish(std::move(created));
    return Status();
  });
}

ibcoll_status_t ibcoll_init_with(const ibcoll_bootstrap_t* bootstrap, ibcoll_context_t* context) {
  return guarded([&] {
    require(bootstrap, "bootstrap");
    require(context, "context");
    if (!bootstrap->allgather) invalid("bootstrap: allgather is null");
    auto allgather = [gather = bootstrap->allgather, state = bootstrap->state](
                         const void* mine, void* all, size_t bytes) {
      return gather(mine, all, bytes, state) == 0;
    };
    auto created = std::make_unique<ibcoll_context>();
    created->context = std::make_unique<ibcoll::runtime::Context>(
        std::make_unique<ibcoll::runtime::CallbackBootstrap>(bootstrap->rank, bootstrap->size,
                                                             allgather));
    *context = publish(std::move(created));
    return Status();
  });
}

ibcoll_status_t ibcoll_finalize(ibcoll_context_t context) {
  return guarded([&] {
    live(context);
    if (context->open_comms || context->open_requests) {
      invalid("context: " + std::to_string(context->open_comms) + " communicators and " +
              std::to_string(context->open_requests) + " requests are still open");
    }
    if (!live_contexts.remove(context)) invalid(not_live("context", "ibcoll_context_t"));
    live_comms.remove(context->world.get());
    delete context;
    return Status();
  });
}

ibcoll_status_t ibcoll_set_external_progress(ibcoll_context_t context, int (*poll)(void* state),
                                             void* state) {
  return guarded([&] {
    live(context);
    context->context->poll_also(poll ? std::function<int()>([poll, state] { return poll(state); })
                                     : std::function<int()>());
    return Status();
  });
}

ibcoll_status_t ibcoll_progress(ibcoll_context_t context) {
  return guarded([&] {
    live(context);
    context->context->progress();
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_world(ibcoll_context_t context, ibcoll_comm_t* comm) {
  return guarded([&] {
    live(context);
    require(comm, "comm");
    *comm = context->world.get();
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_rank(ibcoll_comm_t comm, int* rank) {
  return guarded([&] {
    live(comm);
    require(rank, "rank");
    *rank = comm->communicator->rank();
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_size(ibcoll_comm_t comm, int* size) {
  return guarded([&] {
    live(comm);
    require(size, "size");
    *size = comm->communicator->size();
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_split(ibcoll_comm_t parent, int color, int key, ibcoll_comm_t* comm) {
  return guarded([&] {
    live(parent, "parent");
    require(comm, "comm");
    if (color < 0 && color != IBCOLL_UNDEFINED) {
      invalid("color: " + std::to_string(color) + " is negative and not IBCOLL_UNDEFINED");
    }
    auto split = parent->owner->context->split(*parent->communicator, color, key);
    *comm = adopt(parent->owner, std::move(split));
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_create(ibcoll_comm_t parent, const int* ranks, int count,
                                   ibcoll_comm_t* comm) {
  return guarded([&] {
    live(parent, "parent");
    require(comm, "comm");
    if (count < 0) invalid("count: " + std::to_string(count) + " is negative");
    if (count > 0) require(ranks, "ranks");
    auto created = parent->owner->context->create(
        *parent->communicator, std::span<const int>(ranks, static_cast<size_t>(count)));
    *comm = adopt(parent->owner, std::move(created));
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_next_id(ibcoll_context_t context, unsigned* id) {
  return guarded([&] {
    live(context);
    require(id, "id");
    *id = context->context->ids().next();
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_id_free(ibcoll_context_t context, unsigned id, int* is_free) {
  return guarded([&] {
    live(context);
    require(is_free, "is_free");
    *is_free = context->context->ids().free(id);
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_stamp(ibcoll_context_t context, uint64_t seen, uint64_t* stamp) {
  return guarded([&] {
    live(context);
    require(stamp, "stamp");
    if (seen > 0) context->context->ids().see(seen);
    *stamp = context->context->ids().stamp();
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_from_ranks(ibcoll_context_t context, const int* ranks, int count,
                                       unsigned id, uint64_t stamp, ibcoll_comm_t* comm) {
  return guarded([&] {
    live(context);
    require(comm, "comm");
    if (count <= 0) invalid("count: " + std::to_string(count) + " is not positive");
    require(ranks, "ranks");
    auto created = context->context->from_ranks(
        std::span<const int>(ranks, static_cast<size_t>(count)), id, stamp);
    *comm = adopt(context, std::move(created));
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_like(ibcoll_comm_t like, unsigned id, uint64_t stamp,
                                 ibcoll_comm_t* comm) {
  return guarded([&] {
    live(like, "like");
    require(comm, "comm");
    auto created = like->owner->context->like(*like->communicator, id, stamp);
    *comm = adopt(like->owner, std::move(created));
    return Status();
  });
}

namespace {

// ibcoll_comm_free and ibcoll_comm_abandon: the call it holds settled, its id free again.
Status free_communicator(ibcoll_comm_t* comm, bool abandoned) {
  require(comm, "comm");
  ibcoll_comm* const c = live(*comm, "*comm");
  if (!c->owned) invalid("comm: the world communicator belongs to its context");
  // Claimed first: a second free of it, from another thread too, is refused.
  if (!live_comms.remove(c)) invalid(not_live("*comm", "ibcoll_comm_t"));
  ibcoll::runtime::Context& context = *c->owner->context;
  Status last_call;
  try {
    last_call = context.settle(*c->communicator);
    context.release(*c->communicator, abandoned);
  } catch (...) {
    live_comms.add(c);
    throw;
  }
  --c->owner->open_comms;
  delete c;
  *comm = nullptr;
  return last_call;
}

}  // namespace

ibcoll_status_t ibcoll_comm_free(ibcoll_comm_t* comm) {
  return guarded([&] { return free_communicator(comm, false); });
}

ibcoll_status_t ibcoll_comm_abandon(ibcoll_comm_t* comm) {
  return guarded([&] { return free_communicator(comm, true); });
}

ibcoll_status_t ibcoll_comm_revoke(ibcoll_comm_t comm) {
  return guarded([&] {
    ibcoll_comm* const c = live(comm);
    c->owner->context->revoke(*c->communicator);
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_agree(ibcoll_comm_t comm, int* flags) {
  return guarded([&] {
    ibcoll_comm* const c = live(comm);
    require(flags, "flags");
    const ibcoll::collectives::AgreementDecision agreed = c->owner->context->agree(
        *c->communicator, ibcoll::collectives::Agreement::Fold::bitwise_and,
        {static_cast<uint32_t>(*flags)});
    *flags = static_cast<int>(static_cast<uint32_t>(agreed.values[0]));
    if (agreed.failed.count() == 0) return Status();
    std::string ranks;
    for (int member : agreed.failed.list())
      ranks += (ranks.empty() ? "" : ", ") + std::to_string(member);
    return Status(Code::peer_failed, "agreed, with " + std::to_string(agreed.failed.count()) +
                                         " members of the communicator failed: " + ranks);
  });
}

ibcoll_status_t ibcoll_comm_failed_ranks(ibcoll_comm_t comm, int* ranks, int capacity, int* count) {
  return guarded([&] {
    ibcoll_comm* const c = live(comm);
    require(count, "count");
    if (capacity < 0) invalid("capacity: " + std::to_string(capacity) + " is negative");
    if (capacity > 0) require(ranks, "ranks");
    const std::vector<int>& failed = c->communicator->agreed_failed();
    const size_t shown = std::min(failed.size(), static_cast<size_t>(capacity));
    std::copy_n(failed.begin(), shown, ranks);
    *count = static_cast<int>(failed.size());
    return Status();
  });
}

ibcoll_status_t ibcoll_comm_shrink(ibcoll_comm_t comm, ibcoll_comm_t* newcomm) {
  return guarded([&] {
    ibcoll_comm* const c = live(comm);
    require(newcomm, "newcomm");
    *newcomm = adopt(c->owner, c->owner->context->shrink(*c->communicator));
    return Status();
  });
}

ibcoll_status_t ibcoll_allreduce(const void* send, void* recv, size_t count, ibcoll_datatype_t type,
                                 ibcoll_op_t op, ibcoll_comm_t comm) {
  return guarded([&] {
    live(comm);
    return run(comm, Collective::allreduce, allreduce_args(send, recv, count, type, op));
  });
}

ibcoll_status_t ibcoll_bcast(void* buffer, size_t count, ibcoll_datatype_t type, int root,
                             ibcoll_comm_t comm) {
  return guarded([&] {
    live(comm);
    return run(comm, Collective::bcast, bcast_args(buffer, count, type, root));
  });
}

ibcoll_status_t ibcoll_iallreduce(const void* send, void* recv, size_t count,
                                  ibcoll_datatype_t type, ibcoll_op_t op, ibcoll_comm_t comm,
                                  ibcoll_request_t* request) {
  return guarded([&] {
    live(comm);
    require(request, "request");
    return start(comm, Collective::allreduce, allreduce_args(send, recv, count, type, op), request);
  });
}

ibcoll_status_t ibcoll_ibcast(void* buffer, size_t count, ibcoll_datatype_t type, int root,
                              ibcoll_comm_t comm, ibcoll_request_t* request) {
  return guarded([&] {
    live(comm);
    require(request, "request");
    return start(comm, Collective::bcast, bcast_args(buffer, count, type, root), request);
  });
}

ibcoll_status_t ibcoll_test(ibcoll_request_t request, int* done) {
  return guarded([&] {
    live(request);
    require(done, "done");
    request->owner->context->progress();
    *done = request->request->done();
    if (!*done) return Status();
    request->owner->context->pass_word_on(request->request->status());
    return request->request->status();
  });
}

ibcoll_status_t ibcoll_wait(ibcoll_request_t request) {
  return guarded([&] {
    live(request);
    return request->owner->context->wait(*request->request);
  });
}

ibcoll_status_t ibcoll_request_free(ibcoll_request_t* request) {
  return guarded([&] {
    require(request, "request");
    ibcoll_request* const r = live(*request, "*request");
    // Claimed first: a second free of it, from another thread too, is refused.
    if (!live_requests.remove(r)) invalid(not_live("*request", "ibcoll_request_t"));
    Status outcome;
    try {
      outcome = r->request->done() ? Status() : r->owner->context->wait(*r->request);
    } catch (...) {
      live_requests.add(r);
      throw;
    }
    --r->owner->open_requests;
    delete r;
    *request = nullptr;
    return outcome;
  });
}

const char* ibcoll_algorithm(ibcoll_comm_t comm, ibcoll_collective_t collective, size_t count,
                             ibcoll_datatype_t type) {
  const char* name = nullptr;
  const ibcoll_status_t status = guarded([&] {
    live(comm);
    name = comm->communicator->choose(collective_of(collective), count, data_type(type)).name;
    return Status();
  });
  return status == IBCOLL_SUCCESS ? name : nullptr;
}

const char* ibcoll_transport(ibcoll_comm_t comm, int rank) {
  const char* name = nullptr;
  const ibcoll_status_t status = guarded([&] {
    live(comm);
    const int size = comm->communicator->size();
    if (rank < 0 || rank >= size) {
      invalid("rank: " + std::to_string(rank) + " is outside [0, " + std::to_string(size) + ")");
    }
    name = comm->owner->context->transport_to(
        comm->communicator->members()[static_cast<size_t>(rank)]);
    return Status();
  });
  return status == IBCOLL_SUCCESS ? name : nullptr;
}

ibcoll_status_t ibcoll_get_counters(ibcoll_context_t context, ibcoll_counters_t* counters) {
  return guarded([&] {
    live(context);
    require(counters, "counters");
    const ibcoll::runtime::Context::Counters c = context->context->counters();
    *counters = {c.verbs_connections,  c.verbs_sent.messages, c.verbs_sent.bytes,
                 c.shm_sent.messages,  c.shm_sent.bytes,      c.shm_segment_bytes,
                 c.shm_resident_bytes, c.ucx_endpoints,       c.ucx_sent.messages,
                 c.ucx_sent.bytes};
    return Status();
  });
}

const char* ibcoll_thresholds(ibcoll_context_t context) {
  const char* text = nullptr;
  const ibcoll_status_t status = guarded([&] {
    live(context);
    text = context->context->thresholds().c_str();
    return Status();
  });
  return status == IBCOLL_SUCCESS ? text : nullptr;
}

ibcoll_status_t ibcoll_ring_order(ibcoll_comm_t comm, int* order) {
  return guarded([&] {
    live(comm);
    require(order, "order");
    const std::vector<int> ring = comm->communicator->ring_order();
    std::copy(ring.begin(), ring.end(), order);
    return Status();
  });
}

}  // extern "C"
