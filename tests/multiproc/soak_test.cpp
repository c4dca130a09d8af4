// A soak between 4 forked ranks: randomized collectives (allreduce or bcast; every valid type and
// op; 0 to 1 MiB; every root; in place or not; blocking, or up to 4 in flight waited in any
// order), on several communicators at once (the world, its two halves, the world reversed, 3
// of its ranks), in segments of one init each with the allreduce and bcast algorithms drawn
// (or the table's). Every result is checked against its reference. Memory must stay flat: the
// heap a rank holds after each segment's finalize grows by at most 1 MiB past the first's, and
// under AddressSanitizer a leak check finds nothing. The calls are drawn from SOAK_SEED (printed,
// the same on every rank); SOAK_CALLS (100 000) and SOAK_SECONDS (10, 20 under ASan, where
// leaks show; 0: none) bound the run, rank 0 deciding when to stop. By hand: SOAK_SECONDS=0
// for the whole 100 000.
#include <gtest/gtest.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "collectives/registry.h"
#include "tests/support/collectives.h"

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
// libasan's; gcc ships no header for it.
extern "C" size_t __sanitizer_get_current_allocated_bytes();
#endif

namespace ibcoll::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kRanks = 4;
constexpr int kSegments = 8;
constexpr size_t kMostInFlight = 4;
constexpr size_t kMostBytes = size_t{1} << 20;
constexpr size_t kHeapGrowthAllowed = size_t{1} << 20;
#if defined(__SANITIZE_ADDRESS__)
constexpr uint64_t kDefaultSeconds = 20;
#else
constexpr uint64_t kDefaultSeconds = 10;
#endif

uint64_t env_or(const char* name, uint64_t fallback) {
  const char* text = std::getenv(name);
  return text && *text ? std::strtoull(text, nullptr, 10) : fallback;
}

size_t heap_in_use() {
#if defined(__SANITIZE_ADDRESS__)
  return __sanitizer_get_current_allocated_bytes();
#else
  const struct mallinfo2 heap = mallinfo2();
  return heap.uordblks + heap.hblkhd;  // chunks in the arenas, and those mapped on their own
#endif
}

size_t peak_rss_kib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.starts_with("VmHWM:")) return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

// A call in flight, or one made blocking: what it was given and what it must end with.
struct Call {
  std::string what;
  std::vector<std::byte> buffer, want;
  ibcoll_request_t request = nullptr;
};

// Every member draws the same calls from `rng` (members or not), so the sequence agrees.
class Soak {
 public:
  Soak(ibcoll_comm_t world, std::mt19937_64& rng, int me) : rng_(rng) {
    comms_.push_back(world);
    ibcoll_comm_t half = nullptr, reversed = nullptr, three = nullptr;
    RANK_CHECK(ibcoll_comm_split(world, me % 2, me, &half) == IBCOLL_SUCCESS, ibcoll_last_error());
    const int backwards[kRanks] = {3, 2, 1, 0}, first_three[3] = {0, 1, 2};
    RANK_CHECK(ibcoll_comm_create(world, backwards, kRanks, &reversed) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(ibcoll_comm_create(world, first_three, 3, &three) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    comms_.insert(comms_.end(), {half, reversed, three});  // three is null on rank 3
  }
  ~Soak() {
    for (size_t c = 1; c < comms_.size(); ++c)
      if (comms_[c]) ibcoll_comm_free(&comms_[c]);
  }
  Soak(const Soak&) = delete;
  Soak& operator=(const Soak&) = delete;

  // One drawn call; returns whether this rank took part.
  bool step() {
    const size_t c = draw(comms_.size());
    const bool bcast = draw(2) == 1;
    const DataType type = kTypes[draw(std::size(kTypes))];
    ReduceOp op = kOps[draw(std::size(kOps))];
    while (!collectives::check_reduction(type, op).ok())
      op = kOps[draw(std::size(kOps))];
    const size_t most = kMostBytes / collectives::type_size(type);
    // Half the calls small (up to 128 elements), as most are in real jobs; the rest up to 1 MiB.
    const size_t exponent = draw(2) == 0 ? draw(8) : draw(18);
    const size_t count = draw(20) == 0 ? 0 : std::min(most, size_t{1} << exponent) - draw(2);
    const bool in_place = draw(2) == 1, blocking = draw(3) == 0;
    const int root_draw = static_cast<int>(draw(kRanks));
    ibcoll_comm_t comm = comms_[c];
    if (!comm) return false;
    const int rank = comm_rank(comm), n = comm_size(comm), root = root_draw % n;
    Call call;
    call.what =
        std::string(bcast ? "bcast" : "allreduce") + " of " + std::to_string(count) + " " +
        collectives::type_name(type) +
        (bcast ? " from " + std::to_string(root) : std::string(" ") + collectives::op_name(op)) +
        " on communicator " + std::to_string(c) + " of " + std::to_string(n);
    if (bcast) {
      call.want.resize(count * collectives::type_size(type));
      for (size_t i = 0; i < call.want.size(); ++i)
        call.want[i] = pattern(root, count, i);
      call.buffer = rank == root ? call.want : std::vector<std::byte>(call.want.size());
      start(call, blocking, [&](ibcoll_request_t* request) {
        return request ? ibcoll_ibcast(call.buffer.data(), count, c_type(type), root, comm, request)
                       : ibcoll_bcast(call.buffer.data(), count, c_type(type), root, comm);
      });
    } else {
      call.want = reference(type, op, n, count);
      call.buffer = input(type, op, rank, count);
      if (!in_place) send_.push_back(call.buffer);  // kept until the call ends
      const void* send = in_place ? IBCOLL_IN_PLACE : send_.back().data();
      if (in_place) send_.emplace_back();
      start(call, blocking, [&](ibcoll_request_t* request) {
        return request ? ibcoll_iallreduce(send, call.buffer.data(), count, c_type(type), c_op(op),
                                           comm, request)
                       : ibcoll_allreduce(send, call.buffer.data(), count, c_type(type), c_op(op),
                                          comm);
      });
    }
    return true;
  }

  // Waits for every call in flight, in an order of this rank's own.
  void drain(std::mt19937_64& own) {
    std::vector<size_t> order(flight_.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::shuffle(order.begin(), order.end(), own);
    for (size_t i : order) {
      RANK_CHECK(ibcoll_wait(flight_[i].request) == IBCOLL_SUCCESS,
                 flight_[i].what + ": " + ibcoll_last_error());
      ibcoll_request_free(&flight_[i].request);
      verify(flight_[i]);
    }
    flight_.clear();
    send_.clear();
  }
  size_t in_flight() const { return flight_.size(); }

 private:
  size_t draw(size_t below) { return std::uniform_int_distribution<size_t>(0, below - 1)(rng_); }

  template <typename Issue>
  void start(Call& call, bool blocking, const Issue& issue) {
    if (blocking) {
      RANK_CHECK(issue(nullptr) == IBCOLL_SUCCESS, call.what + ": " + ibcoll_last_error());
      verify(call);
      return;
    }
    RANK_CHECK(issue(&call.request) == IBCOLL_SUCCESS, call.what + ": " + ibcoll_last_error());
    flight_.push_back(std::move(call));  // the vectors' storage moves with it, unchanged
  }

  static void verify(const Call& call) {
    RANK_CHECK(call.buffer == call.want, call.what + ": wrong result");
  }

  std::mt19937_64& rng_;
  std::vector<ibcoll_comm_t> comms_;
  std::vector<Call> flight_;
  std::vector<std::vector<std::byte>> send_;
};

TEST(Soak, RandomizedCollectivesStayRightAndMemoryFlat) {
  const uint64_t seed = env_or("SOAK_SEED", std::random_device{}());
  const uint64_t calls = env_or("SOAK_CALLS", 100000),
                 seconds = env_or("SOAK_SECONDS", kDefaultSeconds);
  std::printf("replay: SOAK_SEED=%llu SOAK_CALLS=%llu SOAK_SECONDS=%llu\n",
              static_cast<unsigned long long>(seed), static_cast<unsigned long long>(calls),
              static_cast<unsigned long long>(seconds));
  std::fflush(stdout);
  std::vector<std::string> allreduce{"auto"}, bcast{"auto"};
  for (const collectives::Algorithm& a : collectives::algorithms())
    (a.collective == collectives::Collective::allreduce ? allreduce : bcast).push_back(a.name);

  RankOptions options;
  options.deadline = std::chrono::seconds(seconds ? seconds + 240 : 7200);
  const auto start = Clock::now();
  expect_all_ok(run_ranks(
      kRanks,
      [&](int me, int) {
        std::mt19937_64 rng(seed), own(seed + 1 + static_cast<uint64_t>(me));
        const auto began = Clock::now();
        uint64_t made = 0, drawn = 0;
        size_t heap_after_first = 0;
        bool go_on = true;
        for (int segment = 0; segment < kSegments && go_on; ++segment) {
          const std::string& a = allreduce[rng() % allreduce.size()];
          const std::string& b = bcast[rng() % bcast.size()];
          setenv("IBCOLL_ALLREDUCE_ALGO", a.c_str(), 1);
          setenv("IBCOLL_BCAST_ALGO", b.c_str(), 1);
          {
            CapiRank r;
            if (const char* forced = std::getenv("IBCOLL_TRANSPORT")) {  // rxe.Soak: verbs
              for (int peer = 0; peer < kRanks; ++peer) {
                RANK_CHECK(peer == me || ibcoll_transport(r.world(), peer) == std::string(forced),
                           "rank " + std::to_string(peer) + " is not reached by " + forced);
              }
            }
            Soak soak(r.world(), rng, me);
            // A segment ends at its share of the calls, or of the time (rank 0's clock decides
            // for every rank, every 64 calls: 1 ends the segment, 2 the run).
            const uint64_t segment_end = calls * static_cast<uint64_t>(segment + 1) / kSegments;
            const auto segment_time = std::chrono::seconds(seconds) * (segment + 1) / kSegments;
            for (int verdict = 0; drawn < segment_end && verdict == 0;) {
              made += soak.step();
              ++drawn;
              if (soak.in_flight() >= kMostInFlight || own() % 8 == 0) soak.drain(own);
              if (drawn % 64 != 0 || seconds == 0) continue;
              soak.drain(own);
              const auto spent = Clock::now() - began;
              verdict = spent > std::chrono::seconds(seconds) ? 2 : spent > segment_time ? 1 : 0;
              RANK_CHECK(ibcoll_bcast(&verdict, 1, IBCOLL_INT32, 0, r.world()) == IBCOLL_SUCCESS,
                         ibcoll_last_error());
              go_on = verdict != 2;
            }
            soak.drain(own);
          }
          const size_t heap = heap_in_use();
          if (segment == 0) heap_after_first = heap;
          RANK_CHECK(heap <= heap_after_first + kHeapGrowthAllowed,
                     "the heap grew from " + std::to_string(heap_after_first) + " to " +
                         std::to_string(heap) + " bytes after segment " + std::to_string(segment) +
                         " (" + a + ", " + b + ")");
          if (me == 0) {
            std::printf(
                "segment %d (allreduce %s, bcast %s): %llu calls drawn so far, heap %zu "
                "bytes after finalize\n",
                segment, a.c_str(), b.c_str(), static_cast<unsigned long long>(drawn), heap);
          }
        }
#if defined(__SANITIZE_ADDRESS__)
        RANK_CHECK(__lsan_do_recoverable_leak_check() == 0, "LeakSanitizer found leaks");
#endif
        std::printf("rank %d: %llu calls drawn, %llu made here, all right; peak RSS %zu KiB\n", me,
                    static_cast<unsigned long long>(drawn), static_cast<unsigned long long>(made),
                    peak_rss_kib());
        return 0;
      },
      options));
  std::printf("wall %.1f s\n", std::chrono::duration<double>(Clock::now() - start).count());
}

}  // namespace
}  // namespace ibcoll::testing
