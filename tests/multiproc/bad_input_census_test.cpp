// A census of bad input (issue 34): every case is a call through the C API, or an ibcoll_init
// under a malformed IBCOLL_* variable, that must fail with IBCOLL_ERR_INVALID_ARGUMENT and a
// message naming the argument or variable, and change nothing: the buffers keep their bytes,
// no handle is made, no descriptor or shared-memory file is left behind, and the communicator
// works afterwards. Stale and foreign handles (freed, finalized, double-freed, pointers that
// ibcoll never made) are among them: the C API checks handles against those alive. The test
// counts the cases and wants at least 40 distinct ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "tests/support/collectives.h"
#include "tests/support/directory_entries.h"

namespace ibcoll::testing {
namespace {

struct BadInput {
  std::string what;   // the scenario
  std::string names;  // what the error message must name
  std::function<ibcoll_status_t()> call;
};

// Runs every case; fails the rank at the first that is accepted, fails otherwise, or names
// something else. Returns how many ran.
int refuse_all(const std::vector<BadInput>& cases) {
  for (const BadInput& c : cases) {
    const ibcoll_status_t status = c.call();
    const std::string message = ibcoll_last_error();
    RANK_CHECK(status == IBCOLL_ERR_INVALID_ARGUMENT,
               c.what + ": got " + ibcoll_status_name(status) + " (" + message + ")");
    RANK_CHECK(message.find(c.names) != std::string::npos,
               c.what + ": the message does not name '" + c.names + "': " + message);
  }
  return static_cast<int>(cases.size());
}

constexpr int kLeastCases = 40;

// The calls, on every rank: each is refused, and there are at least kLeastCases of them.
TEST(BadInputCensus, EveryBadCallIsRefusedNamingItsArgumentAndChangesNothing) {
  expect_all_ok(run_ranks(2, [](int, int n) {
    CapiRank r;
    const ibcoll_context_t ctx = r.context();
    const ibcoll_comm_t w = r.world();
    std::vector<float> data(8, 1.0f), out(8, 7.0f);
    std::vector<int32_t> ints(8, 3);
    int value = 0;
    ibcoll_comm_t made = nullptr;
    ibcoll_context_t made_context = nullptr;
    ibcoll_request_t request = nullptr;
    ibcoll_counters_t counters{};
    int flags = 5, failed[4] = {-1, -1, -1, -1}, failed_count = -1;

    // Handles that are not alive: freed, never made by ibcoll, or freed twice through a copy.
    ibcoll_comm_t freed_comm = nullptr;
    RANK_CHECK(ibcoll_comm_split(w, 0, 0, &freed_comm) == IBCOLL_SUCCESS, ibcoll_last_error());
    const ibcoll_comm_t stale_comm = freed_comm;
    RANK_CHECK(ibcoll_comm_free(&freed_comm) == IBCOLL_SUCCESS, ibcoll_last_error());
    ibcoll_request_t freed_request = nullptr;
    RANK_CHECK(ibcoll_iallreduce(data.data(), out.data(), 8, IBCOLL_FLOAT32, IBCOLL_SUM, w,
                                 &freed_request) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    const ibcoll_request_t stale_request = freed_request;
    RANK_CHECK(ibcoll_request_free(&freed_request) == IBCOLL_SUCCESS, ibcoll_last_error());
    RANK_CHECK(out == std::vector<float>(8, static_cast<float>(n)), "the set-up allreduce");
    out.assign(8, 7.0f);
    int not_a_handle = 0;
    const auto foreign_comm = reinterpret_cast<ibcoll_comm_t>(&not_a_handle);
    const auto foreign_request = reinterpret_cast<ibcoll_request_t>(&not_a_handle);
    const auto foreign_context = reinterpret_cast<ibcoll_context_t>(&not_a_handle);
    ibcoll_comm_t stale_copy = stale_comm, world_copy = w;
    ibcoll_request_t stale_request_copy = stale_request;

    const float* f = data.data();
    float* o = out.data();
    const auto f32 = IBCOLL_FLOAT32;
    const auto sum = IBCOLL_SUM;
    const int duplicate[] = {0, 0}, outside[] = {0, n}, negative[] = {-1};
    const std::vector<BadInput> cases = {
        // allreduce
        {"null send buffer", "send", [&] { return ibcoll_allreduce(nullptr, o, 8, f32, sum, w); }},
        {"null receive buffer", "recv",
         [&] { return ibcoll_allreduce(f, nullptr, 8, f32, sum, w); }},
        {"type past the last", "type",
         [&] { return ibcoll_allreduce(f, o, 8, static_cast<ibcoll_datatype_t>(99), sum, w); }},
        {"negative type", "type",
         [&] { return ibcoll_allreduce(f, o, 8, static_cast<ibcoll_datatype_t>(-1), sum, w); }},
        {"op past the last", "op",
         [&] { return ibcoll_allreduce(f, o, 8, f32, static_cast<ibcoll_op_t>(42), w); }},
        {"negative op", "op",
         [&] { return ibcoll_allreduce(f, o, 8, f32, static_cast<ibcoll_op_t>(-3), w); }},
        {"bxor on float32", "op: bxor",
         [&] { return ibcoll_allreduce(f, o, 8, f32, IBCOLL_BXOR, w); }},
        {"band on float64", "op: band",
         [&] { return ibcoll_allreduce(f, o, 4, IBCOLL_FLOAT64, IBCOLL_BAND, w); }},
        {"bor on float16", "op: bor",
         [&] { return ibcoll_allreduce(f, o, 8, IBCOLL_FLOAT16, IBCOLL_BOR, w); }},
        {"count whose bytes overflow", "count",
         [&] { return ibcoll_allreduce(f, o, SIZE_MAX / 4, IBCOLL_FLOAT64, sum, w); }},
        {"null communicator", "comm", [&] { return ibcoll_allreduce(f, o, 8, f32, sum, nullptr); }},
        {"freed communicator", "comm: not a live",
         [&] { return ibcoll_allreduce(f, o, 8, f32, sum, stale_comm); }},
        {"foreign pointer as communicator", "comm: not a live",
         [&] { return ibcoll_allreduce(f, o, 8, f32, sum, foreign_comm); }},
        // bcast
        {"null bcast buffer", "buffer", [&] { return ibcoll_bcast(nullptr, 8, f32, 0, w); }},
        {"root past the last rank", "root", [&] { return ibcoll_bcast(o, 8, f32, n, w); }},
        {"negative root", "root", [&] { return ibcoll_bcast(o, 8, f32, -1, w); }},
        {"bcast type past the last", "type",
         [&] { return ibcoll_bcast(o, 8, static_cast<ibcoll_datatype_t>(12), 0, w); }},
        {"bcast on a freed communicator", "comm: not a live",
         [&] { return ibcoll_bcast(o, 8, f32, 0, stale_comm); }},
        // revoke
        {"revoke of a null communicator", "comm", [&] { return ibcoll_comm_revoke(nullptr); }},
        {"revoke of a freed communicator", "comm: not a live",
         [&] { return ibcoll_comm_revoke(stale_comm); }},
        // agree, shrink and the failed ranks
        {"agree without flags", "flags", [&] { return ibcoll_comm_agree(w, nullptr); }},
        {"agree on a freed communicator", "comm: not a live",
         [&] { return ibcoll_comm_agree(stale_comm, &flags); }},
        {"shrink without a place for the new one", "newcomm",
         [&] { return ibcoll_comm_shrink(w, nullptr); }},
        {"shrink of a foreign communicator", "comm: not a live",
         [&] { return ibcoll_comm_shrink(foreign_comm, &made); }},
        {"failed ranks into no count", "count",
         [&] { return ibcoll_comm_failed_ranks(w, failed, 4, nullptr); }},
        {"failed ranks with a negative capacity", "capacity",
         [&] { return ibcoll_comm_failed_ranks(w, failed, -1, &failed_count); }},
        {"failed ranks into a null list", "ranks",
         [&] { return ibcoll_comm_failed_ranks(w, nullptr, 4, &failed_count); }},
        // non-blocking calls and requests
        {"iallreduce without a request", "request",
         [&] { return ibcoll_iallreduce(f, o, 8, f32, sum, w, nullptr); }},
        {"ibcast without a request", "request",
         [&] { return ibcoll_ibcast(o, 8, f32, 0, w, nullptr); }},
        {"ibcast with a bad root", "root",
         [&] { return ibcoll_ibcast(o, 8, f32, 5, w, &request); }},
        {"iallreduce on a foreign communicator", "comm: not a live",
         [&] { return ibcoll_iallreduce(f, o, 8, f32, sum, foreign_comm, &request); }},
        {"wait on no request", "request", [&] { return ibcoll_wait(nullptr); }},
        {"wait on a freed request", "request: not a live",
         [&] { return ibcoll_wait(stale_request); }},
        {"wait on a foreign pointer", "request: not a live",
         [&] { return ibcoll_wait(foreign_request); }},
        {"test on a freed request", "request: not a live",
         [&] { return ibcoll_test(stale_request, &value); }},
        {"id_free without an output", "is_free",
         [&] { return ibcoll_comm_id_free(ctx, 1, nullptr); }},
        {"request freed twice", "*request: not a live",
         [&] { return ibcoll_request_free(&stale_request_copy); }},
        {"request_free of nothing", "request", [&] { return ibcoll_request_free(nullptr); }},
        // communicators
        {"split with a negative color", "color",
         [&] { return ibcoll_comm_split(w, -5, 0, &made); }},
        {"split without an output", "comm", [&] { return ibcoll_comm_split(w, 0, 0, nullptr); }},
        {"split of a freed communicator", "parent: not a live",
         [&] { return ibcoll_comm_split(stale_comm, 0, 0, &made); }},
        {"create with a rank twice", "ranks",
         [&] { return ibcoll_comm_create(w, duplicate, 2, &made); }},
        {"create with a rank outside", "ranks",
         [&] { return ibcoll_comm_create(w, outside, 2, &made); }},
        {"create with a negative rank", "ranks",
         [&] { return ibcoll_comm_create(w, negative, 1, &made); }},
        {"create with a negative count", "count",
         [&] { return ibcoll_comm_create(w, duplicate, -2, &made); }},
        {"create with null ranks", "ranks",
         [&] { return ibcoll_comm_create(w, nullptr, 2, &made); }},
        {"free of the world", "world", [&] { return ibcoll_comm_free(&world_copy); }},
        {"communicator freed twice", "*comm: not a live",
         [&] { return ibcoll_comm_free(&stale_copy); }},
        {"free of nothing", "comm", [&] { return ibcoll_comm_free(nullptr); }},
        {"rank without an output", "rank", [&] { return ibcoll_comm_rank(w, nullptr); }},
        {"size of a foreign communicator", "comm: not a live",
         [&] { return ibcoll_comm_size(foreign_comm, &value); }},
        {"like of a freed communicator", "like: not a live",
         [&] { return ibcoll_comm_like(stale_comm, 1, 1, &made); }},
        {"from_ranks with no ranks", "count",
         [&] { return ibcoll_comm_from_ranks(ctx, duplicate, 0, 1, 1, &made); }},
        {"ring order without an output", "order", [&] { return ibcoll_ring_order(w, nullptr); }},
        // contexts
        {"init without an output", "context", [&] { return ibcoll_init(nullptr); }},
        {"init_with without a bootstrap", "bootstrap",
         [&] { return ibcoll_init_with(nullptr, &made_context); }},
        {"world of a foreign context", "context: not a live",
         [&] { return ibcoll_comm_world(foreign_context, &made); }},
        {"counters without an output", "counters",
         [&] { return ibcoll_get_counters(ctx, nullptr); }},
        {"counters of no context", "context",
         [&] { return ibcoll_get_counters(nullptr, &counters); }},
        {"progress of a foreign context", "context: not a live",
         [&] { return ibcoll_progress(foreign_context); }},
        {"stamp without an output", "stamp", [&] { return ibcoll_comm_stamp(ctx, 0, nullptr); }},
        {"finalize of a foreign context", "context: not a live",
         [&] { return ibcoll_finalize(foreign_context); }},
        // (a success leaves the last error as it was: the refusal's message is still there)
        {"finalize with a communicator open", "still open",
         [&] {
           ibcoll_comm_t open = nullptr;
           RANK_CHECK(ibcoll_comm_split(w, 0, 0, &open) == IBCOLL_SUCCESS, ibcoll_last_error());
           const ibcoll_status_t refused = ibcoll_finalize(ctx);
           RANK_CHECK(ibcoll_comm_free(&open) == IBCOLL_SUCCESS, ibcoll_last_error());
           return refused;
         }},
    };
    const int refused = refuse_all(cases);
    RANK_CHECK(!made && !request && !made_context, "a refused call handed out a handle");
    RANK_CHECK(out == std::vector<float>(8, 7.0f), "a refused call wrote to its buffer");
    RANK_CHECK(data == std::vector<float>(8, 1.0f), "a refused call wrote to its input");
    RANK_CHECK(flags == 5 && failed_count == -1 && failed[0] == -1,
               "a refused agreement call wrote to its arguments");
    // The algorithm and transport queries return null for bad input, naming it too.
    RANK_CHECK(!ibcoll_algorithm(w, static_cast<ibcoll_collective_t>(7), 8, f32) &&
                   std::string(ibcoll_last_error()).find("collective") != std::string::npos,
               ibcoll_last_error());
    RANK_CHECK(!ibcoll_transport(w, n) &&
                   std::string(ibcoll_last_error()).find("rank") != std::string::npos,
               ibcoll_last_error());
    RANK_CHECK(
        !ibcoll_thresholds(foreign_context) &&
            std::string(ibcoll_last_error()).find("context: not a live") != std::string::npos,
        ibcoll_last_error());
    // Nothing changed: the world works and agrees.
    RANK_CHECK(ibcoll_allreduce(ints.data(), ints.data(), 8, IBCOLL_INT32, IBCOLL_SUM, w) ==
                   IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(ints == std::vector<int32_t>(8, 3 * n), "the allreduce after the refusals");
    // A misaligned buffer is not bad input (MPI takes any address): it is reduced right, small
    // (slots) and large (messages).
    for (const size_t count : {size_t{8}, size_t{100000}}) {
      std::vector<std::byte> bytes(count * sizeof(double) + 1);
      const std::vector<double> ones(count, 1.0);
      std::memcpy(bytes.data() + 1, ones.data(), count * sizeof(double));
      RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, bytes.data() + 1, count, IBCOLL_FLOAT64,
                                  IBCOLL_SUM, w) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
      std::vector<double> summed(count);
      std::memcpy(summed.data(), bytes.data() + 1, count * sizeof(double));
      RANK_CHECK(summed == std::vector<double>(count, static_cast<double>(n)),
                 "a misaligned buffer of " + std::to_string(count) + " doubles");
    }
    const int total = refused + 3;
    std::printf("bad input census: %d calls refused\n", total);
    RANK_CHECK(total >= kLeastCases, std::to_string(total) + " cases, fewer than the census wants");
    return 0;
  }));
}

// Malformed IBCOLL_* values: ibcoll_init fails naming the variable, hands out no context and
// leaves no descriptor or shared-memory file; once the variable is gone, init works.
TEST(BadInputCensus, EveryMalformedVariableFailsInitNamingItAndLeavesNothing) {
  const std::vector<std::pair<const char*, const char*>> variables = {
      {"IBCOLL_TIMEOUT", "soon"},
      {"IBCOLL_TIMEOUT", "-5s"},
      {"IBCOLL_KEEPALIVE", "often"},
      {"IBCOLL_TRANSPORT", "carrier-pigeon"},
      {"IBCOLL_LOG", "loud"},
      {"IBCOLL_EAGER_LIMIT", "2M"},
      {"IBCOLL_EAGER_BUFFER", "1"},
      {"IBCOLL_SHM_SLOTS", "2"},
      {"IBCOLL_MR_CACHE", "maybe"},
      {"IBCOLL_MR_CACHE_SIZE", "lots"},
      {"IBCOLL_XRC_DIR", "relative/dir"},
      {"IBCOLL_PROBE_AFTER", "0"},
      {"IBCOLL_ALLREDUCE_ALGO", "nonesuch"},
      {"IBCOLL_BCAST_ALGO", "nonesuch"},
      {"IBCOLL_WAIT", "nap"},
      {"IBCOLL_CONNECT", "sometimes"},
      {"IBCOLL_NODE", "two\nlines"},
      {"IBCOLL_CREDITS", "-1"},
      {"IBCOLL_SRQ_DEPTH", "deep"},
      {"IBCOLL_COMM_IDS", "many"},
  };
  expect_all_ok(run_ranks(1, [&](int, int) {
    for (const auto& [name, value] : variables) {
      const std::string what = std::string(name) + "=" + value;
      const auto fds = directory_entries("/proc/self/fd"),
                 shm = directory_entries("/dev/shm", "ibcoll-");
      const char* was = std::getenv(name);
      const std::string before = was ? was : "";
      setenv(name, value, 1);
      ibcoll_context_t context = nullptr;
      const ibcoll_status_t status = ibcoll_init(&context);
      if (was) {
        setenv(name, before.c_str(), 1);
      } else {
        unsetenv(name);
      }
      RANK_CHECK(status == IBCOLL_ERR_INVALID_ARGUMENT && !context,
                 what + ": " + ibcoll_status_name(status) + " (" + ibcoll_last_error() + ")");
      RANK_CHECK(std::string(ibcoll_last_error()).find(name) != std::string::npos,
                 what + ": the message does not name the variable: " + ibcoll_last_error());
      RANK_CHECK(directory_entries("/proc/self/fd") == fds &&
                     directory_entries("/dev/shm", "ibcoll-") == shm,
                 what + ": a refused init left a descriptor or a shared-memory file");
    }
    // Nothing half-made stands in the way: init works; and once finalized, the context is
    // refused, finalized again or asked for its world.
    ibcoll_context_t context = nullptr;
    RANK_CHECK(ibcoll_init(&context) == IBCOLL_SUCCESS, ibcoll_last_error());
    RANK_CHECK(ibcoll_finalize(context) == IBCOLL_SUCCESS, ibcoll_last_error());
    ibcoll_comm_t world = nullptr;
    RANK_CHECK(
        ibcoll_finalize(context) == IBCOLL_ERR_INVALID_ARGUMENT &&
            std::string(ibcoll_last_error()).find("context: not a live") != std::string::npos,
        std::string("finalized twice: ") + ibcoll_last_error());
    RANK_CHECK(ibcoll_comm_world(context, &world) == IBCOLL_ERR_INVALID_ARGUMENT && !world,
               std::string("the world of a finalized context: ") + ibcoll_last_error());
    std::printf(
        "bad input census: %zu malformed variables and 2 uses of a finalized context "
        "refused\n",
        variables.size());
    return 0;
  }));
}

}  // namespace
}  // namespace ibcoll::testing
