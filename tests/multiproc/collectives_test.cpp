// Allreduce and bcast through the C API between forked ranks on the host (shared memory):
// 1..8 ranks (1..5 under ASan; oversubscribed), every algorithm forced in turn and the automatic
// choice, every (type, op), in place and not, every root; references computed here, bits compared
// across ranks and runs; split and created communicators; rings and chains in package order.
#include <gtest/gtest.h>
#include <sched.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "collectives/registry.h"
#include "collectives/slot_group.h"
#include "tests/support/collectives.h"
#include "tests/support/steady_calls.h"
#include "transport/shm/ring.h"
#include "transport/shm/slot_region.h"

namespace ibcoll::testing {
namespace {

// Each run forces one allreduce and one bcast algorithm ("auto" first): enough runs that every
// algorithm of either collective gets one.
std::vector<RankOptions> algorithm_choices() {
  std::vector<std::string> allreduce{"auto"}, bcast{"auto"};
  for (const collectives::Algorithm& a : collectives::algorithms())
    (a.collective == collectives::Collective::allreduce ? allreduce : bcast).push_back(a.name);
  std::vector<RankOptions> runs(std::max(allreduce.size(), bcast.size()));
  for (size_t i = 0; i < runs.size(); ++i) {
    runs[i].environment = {{"IBCOLL_ALLREDUCE_ALGO", allreduce[i % allreduce.size()]},
                           {"IBCOLL_BCAST_ALGO", bcast[i % bcast.size()]}};
    runs[i].deadline = std::chrono::seconds(240);
  }
  return runs;
}

// Under AddressSanitizer the two sweeps over every algorithm stop at fewer ranks (up to 5: one
// and two, powers of two past two, odd counts that fold; large messages at 3 ranks only, whose
// chunks and ring steps take the paths 2 ranks take and more), sweep one type of each element
// size (every type's kernel runs under it in reduce_kernels_test; the algorithms' memory paths
// differ by element size only), and leave out the 16 MiB messages (1 MiB + 5 already wraps
// every ring and splits into every chunk), for CI's time: every rank is several times slower
// there, and the rest adds shapes, not memory paths, that the normal build runs.
#if defined(__SANITIZE_ADDRESS__)
constexpr int kMostRanksSwept = 5;
constexpr std::array kLargeMessageRanks{3};
const std::vector<DataType> kSweptTypes{DataType::int8, DataType::bfloat16, DataType::float32,
                                        DataType::int64};
constexpr bool kSixteenMiB = false;
#else
constexpr int kMostRanksSwept = 8;
constexpr std::array kLargeMessageRanks{2, 3, 4};
const std::vector<DataType> kSweptTypes{std::begin(kTypes), std::end(kTypes)};
constexpr bool kSixteenMiB = true;
#endif

std::string label(const RankOptions& run, int ranks) {
  return "allreduce " + run.environment.at("IBCOLL_ALLREDUCE_ALGO") + ", bcast " +
         run.environment.at("IBCOLL_BCAST_ALGO") + ", " + std::to_string(ranks) + " ranks";
}

TEST(Collectives, EveryAlgorithmTypeOpAndRootOneToEightRanks) {
  for (const RankOptions& run : algorithm_choices()) {
    for (int ranks = 1; ranks <= kMostRanksSwept; ++ranks) {
      SCOPED_TRACE(label(run, ranks));
      expect_all_ok(run_ranks(
          ranks,
          [](int, int) {
            CapiRank r;
            allreduce_sweep(r.world(), kSweptTypes, {0, 1, 7, 1031, 65537});
            bcast_every_root(r.world(), DataType::uint8, {0, 1, 7, 1031, 65537});
            return 0;
          },
          run));
    }
  }
}

// Without the slot region: the channel algorithms at small sizes too, the checked recursive
// doubling doubling as the call check.
// Sizes read from the sender's memory (here 4 KiB and up) go direct from 3 ranks.
TEST(Collectives, WithoutSlotsOneToFiveRanks) {
  RankOptions options;
  options.environment = {{"IBCOLL_SHM_SLOTS", "0"}, {"IBCOLL_SHM_SINGLE_COPY", "4K"}};
  for (int ranks = 1; ranks <= 5; ++ranks) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_all_ok(run_ranks(
        ranks,
        [](int, int n) {
          CapiRank r;
          allreduce_sweep(r.world(), {DataType::int16, DataType::bfloat16, DataType::float64},
                          {0, 1, 7, 1031});
          bcast_every_root(r.world(), DataType::uint8, {0, 7, 1031, 65537});
          const std::string chosen = ibcoll_algorithm(r.world(), IBCOLL_BCAST, 65537, IBCOLL_UINT8);
          RANK_CHECK((chosen == "direct") == (n >= 3), "a 64 KiB bcast runs " + chosen);
          return 0;
        },
        options));
  }
}

// 1 MiB + 5 and 16 MiB: fewer types (the kernels are the same at every size), every algorithm;
// through the rings, then (1 MiB + 5 only) with every message of 4 KiB or more read from its
// sender's memory. The automatic bcast reads the root's buffer through the slots (single_copy)
// exactly when its size is read from the sender's memory; without the slots, from 3 ranks,
// it is direct then.
TEST(Collectives, LargeMessagesEveryAlgorithmRingsAndSingleCopy) {
  for (const bool single_copy : {false, true}) {
    for (RankOptions run : algorithm_choices()) {
      run.environment["IBCOLL_SHM_SINGLE_COPY"] = single_copy ? "4K" : "0";
      const bool auto_bcast = run.environment.at("IBCOLL_BCAST_ALGO") == "auto";
      for (int ranks : kLargeMessageRanks) {
        SCOPED_TRACE(label(run, ranks) + (single_copy ? ", single copy" : ", rings"));
        expect_all_ok(run_ranks(
            ranks,
            [single_copy, auto_bcast](int, int) {
              CapiRank r;
              const size_t floats = (1 << 20) / 4 + 5, bytes = (1 << 20) + 5;
              if (auto_bcast) {
                const std::string chosen =
                    ibcoll_algorithm(r.world(), IBCOLL_BCAST, bytes, IBCOLL_UINT8);
                RANK_CHECK((chosen == "single_copy") == single_copy,
                           "a 1 MiB bcast runs " + chosen);
              }
              const bool sixteen_mib = kSixteenMiB && !single_copy;
              allreduce_sweep(
                  r.world(), {DataType::float32},
                  sixteen_mib ? std::vector<size_t>{floats, 4 << 20} : std::vector<size_t>{floats});
              bcast_every_root(
                  r.world(), DataType::uint8,
                  sixteen_mib ? std::vector<size_t>{bytes, 16 << 20} : std::vector<size_t>{bytes});
              if (!single_copy) allreduce_sweep(r.world(), {DataType::int8}, {bytes});
              return 0;
            },
            run));
      }
    }
  }
}

// Random floats: the sum depends on the order of additions, so equal bits on every rank and in
// every run show that the order is fixed by the algorithm, never by arrival.
TEST(Collectives, BitwiseIdenticalAcrossRanksAndRuns) {
  for (const RankOptions& run : algorithm_choices()) {
    for (int ranks : {3, 5, 8}) {
      SCOPED_TRACE(label(run, ranks));
      expect_all_ok(run_ranks(
          ranks,
          [](int me, int) {
            CapiRank r;
            std::mt19937 rng(static_cast<unsigned>(me) + 1);
            std::uniform_real_distribution<float> value(-1e6f, 1e6f);
            for (size_t count : {size_t{7}, size_t{65537}, size_t{300000}}) {
              std::vector<float> mine(count), first(count), second(count);
              for (float& v : mine)
                v = value(rng);
              for (std::vector<float>* out : {&first, &second}) {
                RANK_CHECK(ibcoll_allreduce(mine.data(), out->data(), count, IBCOLL_FLOAT32,
                                            IBCOLL_SUM, r.world()) == IBCOLL_SUCCESS,
                           ibcoll_last_error());
              }
              RANK_CHECK(std::memcmp(first.data(), second.data(), count * 4) == 0,
                         "two runs gave different bits");
              expect_same_everywhere(r.world(), first.data(), count * 4,
                                     "sum of " + std::to_string(count) + " random floats");
            }
            return 0;
          },
          run));
    }
  }
}

// Split by parity (reversed order by key) and a communicator from a list: each works on its
// own and beside the world, and reports its members' transports.
TEST(Collectives, SplitAndCreatedCommunicators) {
  expect_all_ok(run_ranks(5, [](int me, int n) {
    CapiRank r;
    ibcoll_comm_t parity = nullptr, listed = nullptr, none = nullptr;
    RANK_CHECK(ibcoll_comm_split(r.world(), me % 2, -me, &parity) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    const int expected_size = (n + 1 - me % 2) / 2;
    RANK_CHECK(comm_size(parity) == expected_size, "parity communicator size");
    RANK_CHECK(comm_rank(parity) == expected_size - 1 - me / 2, "ordered by key");
    allreduce_sweep(parity, {DataType::int32, DataType::float64}, {1, 1031});
    bcast_every_root(parity, DataType::int16, {3});

    const int list[] = {3, 1, 4};
    RANK_CHECK(ibcoll_comm_create(r.world(), list, 3, &listed) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    if (me == 3 || me == 1 || me == 4) {
      RANK_CHECK(listed && comm_size(listed) == 3, "created communicator");
      RANK_CHECK(comm_rank(listed) == (me == 3 ? 0 : me == 1 ? 1 : 2), "ranks in list order");
      allreduce_sweep(listed, {DataType::uint16}, {7});
      RANK_CHECK(std::string(ibcoll_transport(listed, (comm_rank(listed) + 1) % 3)) == "shm",
                 "ranks on one node talk through shared memory");
      RANK_CHECK(ibcoll_comm_free(&listed) == IBCOLL_SUCCESS && !listed, ibcoll_last_error());
    } else {
      RANK_CHECK(listed == nullptr, "a rank outside the list got a communicator");
    }
    RANK_CHECK(ibcoll_comm_split(r.world(), IBCOLL_UNDEFINED, 0, &none) == IBCOLL_SUCCESS &&
                   none == nullptr,
               "IBCOLL_UNDEFINED gives no communicator");
    allreduce_sweep(r.world(), {DataType::int64}, {5});
    RANK_CHECK(ibcoll_comm_free(&parity) == IBCOLL_SUCCESS, ibcoll_last_error());
    return 0;
  }));
}

// Node-local communicators take slot sets from the node's pool while they live, any ids: with
// the world holding one, the next kSets - 1 split communicators all run the slots, and those
// after them run without (every member agreeing, so their calls still meet). Freed
// communicators give their sets back: new ones take them, cleared, and run the slots again.
TEST(Collectives, LiveCommunicatorsRunInTheSlotsWhileTheNodesSetsLast) {
  expect_all_ok(run_ranks(3, [](int me, int) {
    CapiRank r;
    constexpr int kSets = transport::shm::SlotRegion::kSets;
    std::vector<ibcoll_comm_t> comms(kSets + 2);
    auto split = [&](size_t i) {
      RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &comms[i]) == IBCOLL_SUCCESS,
                 ibcoll_last_error());
    };
    auto runs_slots = [&](size_t i) {
      return std::string(ibcoll_algorithm(comms[i], IBCOLL_ALLREDUCE, 1, IBCOLL_FLOAT64)) ==
             "slots";
    };
    for (size_t i = 0; i < comms.size(); ++i) {
      split(i);
      RANK_CHECK(runs_slots(i) == (i + 1 < kSets), "communicator " + std::to_string(i) +
                                                       (runs_slots(i) ? " runs" : " misses") +
                                                       " the slots");
    }
    for (ibcoll_comm_t comm : comms)
      allreduce_sweep(comm, {DataType::float64}, {1, 3});
    for (size_t i = 0; i < 100; i += 2)
      RANK_CHECK(ibcoll_comm_free(&comms[i]) == IBCOLL_SUCCESS, ibcoll_last_error());
    for (size_t i = 0; i < 100; i += 2) {
      split(i);
      RANK_CHECK(runs_slots(i), "a set given back was not taken again");
      allreduce_sweep(comms[i], {DataType::int32}, {1, 1031});
      bcast_every_root(comms[i], DataType::uint8, {5});
    }
    for (ibcoll_comm_t& comm : comms)
      RANK_CHECK(ibcoll_comm_free(&comm) == IBCOLL_SUCCESS, ibcoll_last_error());
    return 0;
  }));
}

// Communicator ids (here 2..12, IBCOLL_COMM_IDS) are free again once their communicators are:
// a thousand split / allreduce / free cycles of changing subsets all run, in the slots, with
// the right sums; holding every id, a split fails saying so and changes nothing; with the
// highest id still held (so the members' next free id is past the last), the lowest id free on
// every member is found and taken.
TEST(Collectives, CommunicatorIdsAreFreeAgainOnceTheirCommunicatorsAre) {
  RankOptions options;
  options.environment = {{"IBCOLL_COMM_IDS", "12"}};
  expect_all_ok(run_ranks(
      3,
      [](int me, int) {
        CapiRank r;
        for (int cycle = 0; cycle < 1000; ++cycle) {
          // All three, then {0, 1} and {2}, then {0, 2} and {1}.
          const auto color_of = [&](int rank) {
            return cycle % 3 == 0 ? 0 : cycle % 3 == 1 ? rank / 2 : rank % 2;
          };
          const int color = color_of(me);
          ibcoll_comm_t comm = nullptr;
          RANK_CHECK(ibcoll_comm_split(r.world(), color, me, &comm) == IBCOLL_SUCCESS,
                     "cycle " + std::to_string(cycle) + ": " + ibcoll_last_error());
          if (comm_size(comm) > 1)
            expect_algorithm(comm, IBCOLL_ALLREDUCE, 1, IBCOLL_INT64, "slots");
          int64_t x = me + 1, sum = 0;
          RANK_CHECK(
              ibcoll_allreduce(&x, &sum, 1, IBCOLL_INT64, IBCOLL_SUM, comm) == IBCOLL_SUCCESS,
              ibcoll_last_error());
          int64_t want = 0;
          for (int rank = 0; rank < 3; ++rank)
            want += color_of(rank) == color ? rank + 1 : 0;
          RANK_CHECK(sum == want, "cycle " + std::to_string(cycle) + ": wrong sum");
          RANK_CHECK(ibcoll_comm_free(&comm) == IBCOLL_SUCCESS, ibcoll_last_error());
        }
        std::vector<ibcoll_comm_t> held(11);
        for (ibcoll_comm_t& comm : held)
          RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &comm) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
        ibcoll_comm_t one_more = nullptr;
        RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &one_more) == IBCOLL_ERR_SYSTEM &&
                       std::strstr(ibcoll_last_error(), "ids are held") && !one_more,
                   std::string("a split with every id held: ") + ibcoll_last_error());
        for (size_t i = 0; i + 1 < held.size(); ++i)  // the last holds id 12
          RANK_CHECK(ibcoll_comm_free(&held[i]) == IBCOLL_SUCCESS, ibcoll_last_error());
        ibcoll_comm_t low = nullptr;
        RANK_CHECK(ibcoll_comm_split(r.world(), 0, me, &low) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        int two_free = -1;
        ibcoll_comm_id_free(r.context(), 2, &two_free);
        RANK_CHECK(two_free == 0, "the lowest free id was not the one taken");
        allreduce_sweep(low, {DataType::float32}, {1, 1000});
        RANK_CHECK(ibcoll_comm_free(&low) == IBCOLL_SUCCESS &&
                       ibcoll_comm_free(&held.back()) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        return 0;
      },
      options));
}

// A member may be done with a communicator before another has even made it: a bcast's root
// runs ahead (it needs nothing from the others). Here the root makes the communicator, bcasts
// through the slots and frees it before the others make theirs (not collective, by id); they
// still find its set, with its data, in the node's directory, which lets the set go only once
// every member has.
TEST(Collectives, AMemberThatFreesFirstLeavesTheSlotSetToTheLateOnes) {
  expect_all_ok(run_ranks(3, [](int me, int) {
    CapiRank r;
    const int ranks[] = {0, 1, 2};
    constexpr unsigned kId = 1000;
    constexpr uint64_t kStamp = 50;
    std::vector<int32_t> data(100, me == 0 ? 42 : 0);
    ibcoll_comm_t comm = nullptr;
    if (me != 0) meet_without_ibcoll("root-done", me, {0, 1, 2});
    RANK_CHECK(ibcoll_comm_from_ranks(r.context(), ranks, 3, kId, kStamp, &comm) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    expect_algorithm(comm, IBCOLL_BCAST, data.size(), IBCOLL_INT32, "slots");
    RANK_CHECK(ibcoll_bcast(data.data(), data.size(), IBCOLL_INT32, 0, comm) == IBCOLL_SUCCESS,
               ibcoll_last_error());
    RANK_CHECK(ibcoll_comm_free(&comm) == IBCOLL_SUCCESS, ibcoll_last_error());
    if (me == 0) meet_without_ibcoll("root-done", me, {0, 1, 2});
    RANK_CHECK(data == std::vector<int32_t>(100, 42), "the late members did not get the data");
    return 0;
  }));
  meeting_over("root-done", {0, 1, 2});
}

// Back-to-back small bcasts through the slots: a root runs up to SlotGroup::kRunAhead calls ahead
// of members that have not come yet (as its buffers allow, like an MPI library's eager sends),
// and they catch up with every call's data. A root held to fewer waits for them here until its
// deadline (IBCOLL_TIMEOUT) fails it.
TEST(Collectives, ARootRunsAheadOfItsMembersByItsWindowOfSlotCalls) {
  RankOptions options;
  options.environment = {{"IBCOLL_TIMEOUT", "10s"}};
  constexpr int kAhead = static_cast<int>(collectives::SlotGroup::kRunAhead);
  expect_all_ok(run_ranks(
      3,
      [](int me, int n) {
        CapiRank r;
        expect_algorithm(r.world(), IBCOLL_BCAST, 1, IBCOLL_INT64, "slots");
        std::vector<int> everyone(static_cast<size_t>(n));
        std::iota(everyone.begin(), everyone.end(), 0);
        const auto bcast = [&](int call) {
          int64_t value = me == 0 ? 1000 + call : -1;
          RANK_CHECK(ibcoll_bcast(&value, 1, IBCOLL_INT64, 0, r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          RANK_CHECK(value == 1000 + call,
                     "call " + std::to_string(call) + " got " + std::to_string(value));
        };
        int call = 0;
        if (me == 0) {
          for (; call < kAhead; ++call)
            bcast(call);
        }
        meet_without_ibcoll("run-ahead", me, everyone);
        for (; call < 3 * kAhead; ++call)
          bcast(call);
        std::vector<int32_t> ones(3, 1);
        RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, ones.data(), 3, IBCOLL_INT32, IBCOLL_SUM,
                                    r.world()) == IBCOLL_SUCCESS &&
                       ones == std::vector<int32_t>(3, n),
                   ibcoll_last_error());
        return 0;
      },
      options));
  meeting_over("run-ahead", {0, 1, 2});
}

// The node's shared segment takes memory for what its ranks use, not for its size: its file is
// sparse, so a ring's pages exist once its pair has talked, and a slot set's while a
// communicator holds it. After start-up, allreduces (slots, staged) and bcasts from one root
// (by messages: single copy off) up to 1 MiB, at 2 to 16 ranks, it holds at most a slot set's
// worth (the world's, and the node calibration's, freed and kept warm), two rings per rank (the
// bcasts' pairs) and two pages per ordered pair (the rings' counters and the rendezvous answers,
// which every poll reads), where every pair's ring would take L * L * 256 KiB. The figures go to
// stdout for the record.
TEST(Collectives, TheSharedSegmentHoldsMemoryForWhatItsRanksUse) {
  RankOptions options;
  options.environment = {{"IBCOLL_SHM_SINGLE_COPY", "0"}};
  for (int ranks : {2, 4, 8, 16}) {
    SCOPED_TRACE(std::to_string(ranks) + " ranks");
    expect_all_ok(run_ranks(
        ranks,
        [](int me, int n) {
          CapiRank r;
          allreduce_sweep(r.world(), {DataType::float32}, {1, 1031, 65537, size_t{1} << 18});
          for (size_t bytes : {size_t{100}, size_t{65536}, size_t{1} << 20}) {
            std::vector<std::byte> data(bytes, std::byte{7});
            RANK_CHECK(
                ibcoll_bcast(data.data(), bytes, IBCOLL_UINT8, 0, r.world()) == IBCOLL_SUCCESS,
                ibcoll_last_error());
          }
          ibcoll_counters_t c{};
          RANK_CHECK(ibcoll_get_counters(r.context(), &c) == IBCOLL_SUCCESS, ibcoll_last_error());
          const auto l = static_cast<size_t>(n);
          const size_t bound =
              l * (sizeof(transport::shm::SlotRegion::Slot) + 2 * transport::shm::Ring::kBytes) +
              l * l * 2 * 4096 + (64 << 10);
          if (me == 0) {
            std::printf("%d ranks: segment %.1f MiB, resident %.2f MiB (bound %.2f MiB)\n", n,
                        static_cast<double>(c.shm_segment_bytes) / (1 << 20),
                        static_cast<double>(c.shm_resident_bytes) / (1 << 20),
                        static_cast<double>(bound) / (1 << 20));
          }
          RANK_CHECK(c.shm_resident_bytes > 0 && c.shm_resident_bytes <= bound,
                     "the segment holds " + std::to_string(c.shm_resident_bytes) +
                         " bytes, more than " + std::to_string(bound));
          return 0;
        },
        options));
  }
}

// Bytes available to new allocations here (MemAvailable), or 0 if unknown.
size_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  for (std::string line; std::getline(meminfo, line);) {
    if (line.rfind("MemAvailable:", 0) == 0) return std::stoull(line.substr(13)) << 10;  // kB
  }
  return 0;
}

// A vector past 4 GiB (4 GiB + 1 KiB) crosses between two ranks through the rings in one
// message (binomial bcast): every size and offset on the way is 64-bit. Each 4 KiB page of it
// starts with its own number, so a page landing in the wrong place shows; the last KiB, past
// the 32-bit boundary, is checked byte for byte. Over verbs such a message travels in pieces
// of the largest message (tests/unit/split_messages_test.cpp).
TEST(Collectives, AVectorPastFourGiB) {
  constexpr size_t kBytes = (size_t{4} << 30) + 1024, kPage = 4096;
  if (available_memory() < 2 * kBytes + (size_t{2} << 30)) {
    GTEST_SKIP() << "needs 10 GiB of memory available (two ranks of 4 GiB + 1 KiB)";
  }
  RankOptions options;
  options.environment = {{"IBCOLL_SHM_SINGLE_COPY", "0"}};
  options.deadline = std::chrono::seconds(240);
  expect_all_ok(run_ranks(
      2,
      [](int me, int) {
        CapiRank r;
        expect_algorithm(r.world(), IBCOLL_BCAST, kBytes, IBCOLL_UINT8, "binomial");
        auto data = std::make_unique_for_overwrite<uint8_t[]>(kBytes);
        const auto tail = [](size_t i) { return static_cast<uint8_t>(i * 131 % 251); };
        std::memset(data.get(), me == 0 ? 0x5A : 0xEE, kBytes);
        if (me == 0) {
          for (uint64_t page = 0; page * kPage < kBytes; ++page)
            std::memcpy(&data[page * kPage], &page, sizeof(page));
          for (size_t i = kBytes - 1024; i < kBytes; ++i)
            data[i] = tail(i);
        }
        RANK_CHECK(ibcoll_bcast(data.get(), kBytes, IBCOLL_UINT8, 0, r.world()) == IBCOLL_SUCCESS,
                   ibcoll_last_error());
        for (uint64_t page = 0; page * kPage < kBytes - 1024; ++page) {
          uint64_t stamp = 0;
          std::memcpy(&stamp, &data[page * kPage], sizeof(stamp));
          RANK_CHECK(stamp == page && data[page * kPage + kPage - 1] == 0x5A,
                     "page " + std::to_string(page) + " holds page " + std::to_string(stamp));
        }
        for (size_t i = kBytes - 1024; i < kBytes; ++i)
          RANK_CHECK(data[i] == tail(i), "byte " + std::to_string(i) + " past 4 GiB");
        return 0;
      },
      options));
}

// Small calls in a steady stream make no heap allocation per call, on 2 to 4 ranks: in the
// slots, and through the shared-memory channel's messages (slots off: the checked recursive
// doubling and binomial bcast, whose early arrivals each took two allocations).
TEST(Collectives, SteadySmallCallsDoNotAllocatePerCall) {
  for (const char* slots : {"1", "0"}) {
    SCOPED_TRACE(std::string("IBCOLL_SHM_SLOTS=") + slots);
    RankOptions options;
    options.environment = {{"IBCOLL_SHM_SLOTS", slots}};
    expect_no_allocation_per_small_call(options, {2, 3, 4});
  }
}

// Rings and chains go package by package: on a synthetic node of two packages of one PU each
// (IBCOLL_TOPOLOGY; PU 0 on package 0, PU 1 on package 1), ranks bound in turn to PUs 0, 1, 0, 1
// take the ring 0 2 1 3, so it crosses between packages twice rather than at every hop. Each
// ring and chain algorithm is forced and must run, correct for every root in that order; and
// a split communicator gets its own order. Without the binding, the order is the ranks'.
TEST(Collectives, RingsAndChainsGoPackageByPackage) {
  cpu_set_t online;
  ASSERT_EQ(sched_getaffinity(0, sizeof(online), &online), 0);
  if (!CPU_ISSET(0, &online) || !CPU_ISSET(1, &online)) GTEST_SKIP() << "needs cpus 0 and 1";
  for (const auto& [allreduce, bcast] :
       {std::pair{"ring", "chain"}, std::pair{"ring", "scatter_allgather"}}) {
    for (const bool bound : {true, false}) {
      SCOPED_TRACE(std::string(allreduce) + ", " + bcast + (bound ? ", bound" : ", unbound"));
      RankOptions options;
      options.environment = {{"IBCOLL_TOPOLOGY", "pack:2 core:1 pu:1"},
                             {"IBCOLL_SHM_SLOTS", "0"},
                             {"IBCOLL_ALLREDUCE_ALGO", allreduce},
                             {"IBCOLL_BCAST_ALGO", bcast}};
      expect_all_ok(run_ranks(
          4,
          [bound](int me, int) {
            if (bound) {
              cpu_set_t one;
              CPU_ZERO(&one);
              CPU_SET(me % 2, &one);
              RANK_CHECK(sched_setaffinity(0, sizeof(one), &one) == 0, "cannot bind");
            }
            CapiRank r;
            std::vector<int> order(4);
            RANK_CHECK(ibcoll_ring_order(r.world(), order.data()) == IBCOLL_SUCCESS,
                       ibcoll_last_error());
            const std::vector<int> expected =
                bound ? std::vector<int>{0, 2, 1, 3} : std::vector<int>{0, 1, 2, 3};
            RANK_CHECK(order == expected, "the world's ring order is not the expected one");
            allreduce_sweep(r.world(), {DataType::int32, DataType::float32}, {1031, 65537});
            bcast_every_root(r.world(), DataType::uint8, {1031, 65537});
            // Ranks 3, 2, 1 (by key) are bound to packages 1, 0, 1: package 0's member first,
            // so the ring is 1 0 2 when bound.
            ibcoll_comm_t three = nullptr;
            RANK_CHECK(ibcoll_comm_split(r.world(), me == 0 ? IBCOLL_UNDEFINED : 0, -me, &three) ==
                           IBCOLL_SUCCESS,
                       ibcoll_last_error());
            if (three) {
              std::vector<int> three_order(3);
              RANK_CHECK(ibcoll_ring_order(three, three_order.data()) == IBCOLL_SUCCESS,
                         ibcoll_last_error());
              RANK_CHECK(
                  three_order == (bound ? std::vector<int>{1, 0, 2} : std::vector<int>{0, 1, 2}),
                  "the split communicator's ring order is not the expected one");
              bcast_every_root(three, DataType::uint8, {65537});
              allreduce_sweep(three, {DataType::float64}, {1031});
              RANK_CHECK(ibcoll_comm_free(&three) == IBCOLL_SUCCESS, ibcoll_last_error());
            }
            return 0;
          },
          options));
    }
  }
}

}  // namespace
}  // namespace ibcoll::testing
