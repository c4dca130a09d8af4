// The registration cache over verbs, on by default (IBCOLL_MR_CACHE=auto) because libucm tells
// it what is unmapped: buffers used again are found in it, and a buffer whose memory left the
// address space (munmap whole or in part, mremap, a freed malloc) is never served its old
// registration, even when new memory appears at the same address: the data says so (an old
// registration reaches the old pages, so a root would send what was there, and a receiver's
// bytes would land there). Two ranks over verbs, messages above the rendezvous threshold.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/context.h"
#include "tests/support/collectives.h"
#include "transport/ucx/unmap_watch.h"

namespace ibcoll::testing {
namespace {

constexpr size_t kBytes = size_t{1} << 20;

RankOptions cached_rendezvous() {
  RankOptions options;
  options.deadline = std::chrono::seconds(300);
  options.environment = {{"IBCOLL_TRANSPORT", "verbs"}, {"IBCOLL_EAGER_LIMIT", "8K"}};
  return options;
}

std::byte* map_at(void* where, size_t bytes) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | (where ? MAP_FIXED_NOREPLACE : 0);
  void* at = mmap(where, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
  RANK_CHECK(at != MAP_FAILED && (!where || at == where), "could not map at the old address");
  return static_cast<std::byte*>(at);
}

// A bcast from rank 0 of `bytes` at `buffer`, which holds `tag`'s pattern at the root and junk
// elsewhere; every rank must end with the pattern.
void bcast_and_check(runtime::Context& context, std::byte* buffer, size_t bytes, int tag) {
  const int rank = context.world().rank();
  for (size_t i = 0; i < bytes; ++i)
    buffer[i] =
        static_cast<std::byte>(rank == 0 ? (i * 7 + static_cast<size_t>(tag)) & 0xFF : 0xEE);
  collectives::CollectiveArgs args;
  args.send = args.recv = buffer;
  args.count = bytes;
  const Status status = context.run(context.world(), collectives::Collective::bcast, args);
  RANK_CHECK(status.ok(), status.to_string());
  for (size_t i = 0; i < bytes; ++i) {
    if (buffer[i] != static_cast<std::byte>((i * 7 + static_cast<size_t>(tag)) & 0xFF)) {
      RANK_CHECK(false, "byte " + std::to_string(i) + " of bcast " + std::to_string(tag) +
                            " is not the root's: a stale registration was used");
    }
  }
}

TEST(VerbsRegistrationCache, MemoryMappedAgainAtAnAddressIsNeverServedTheOldRegistration) {
#ifndef IBCOLL_HAVE_UCX  // the sanitized build among others: no unmap reports, cache off
  GTEST_SKIP() << "built without UCX: the cache is off by default";
#endif
  expect_all_ok(run_ranks(
      2,
      [](int, int) {
        RANK_CHECK(transport::ucx::UnmapWatch::watching(), transport::ucx::UnmapWatch::start());
        runtime::Context context;
        // Used twice: the second is the cache's.
        std::byte* whole = map_at(nullptr, kBytes);
        bcast_and_check(context, whole, kBytes, 1);
        const auto first = context.counters();
        bcast_and_check(context, whole, kBytes, 2);
        RANK_CHECK(context.counters().registration_hits > first.registration_hits,
                   "a buffer used again was registered again");
        // Unmapped and mapped again at the same address.
        munmap(whole, kBytes);
        whole = map_at(whole, kBytes);
        bcast_and_check(context, whole, kBytes, 3);
        // A part of a larger buffer unmapped and mapped again.
        std::byte* larger = map_at(nullptr, 3 * kBytes);
        bcast_and_check(context, larger, 3 * kBytes, 4);
        munmap(larger + kBytes, kBytes);
        map_at(larger + kBytes, kBytes);
        bcast_and_check(context, larger + kBytes, kBytes, 5);
        // Moved by mremap, and new memory mapped where it was.
        std::byte* moving = map_at(nullptr, kBytes);
        bcast_and_check(context, moving, kBytes, 6);
        void* moved = mremap(moving, kBytes, 8 * kBytes, MREMAP_MAYMOVE);
        RANK_CHECK(moved != MAP_FAILED, "mremap failed");
        if (moved != moving) map_at(moving, kBytes);
        bcast_and_check(context, moving, kBytes, 7);
        const auto c = context.counters();
        RANK_CHECK(c.registrations_unmapped >= 3,
                   "unmapped entries dropped: " + std::to_string(c.registrations_unmapped));
        RANK_CHECK(c.registration_misses > first.registration_misses + 2,
                   "memory mapped again was taken from the cache");
        return 0;
      },
      cached_rendezvous()));
}

// The loop an application runs: malloc, allreduce, free, a thousand times, above the rendezvous
// threshold; every result checked. For the first 500 rounds glibc's mmap threshold is below the
// buffers and its heap trimmed to nothing spare, so they come from new mappings, mostly where
// the last ones were (the old registration must be dropped); then from its heap, kept untrimmed
// (the registration is still good and is found). A heap with room left from start-up would serve
// even the first rounds (glibc maps only what its heap cannot hold): mallinfo2 counts the rounds
// that really mapped.
TEST(VerbsRegistrationCache, AThousandRoundsOfMallocAllreduceFreeStayRight) {
#ifndef IBCOLL_HAVE_UCX  // the sanitized build among others: no unmap reports, cache off
  GTEST_SKIP() << "built without UCX: the cache is off by default";
#endif
  expect_all_ok(run_ranks(
      2,
      [](int, int) {
        runtime::Context context;
        const int rank = context.world().rank();
        constexpr size_t kFloats = 16 << 10;  // 64 KiB
        RANK_CHECK(mallopt(M_MMAP_THRESHOLD, 32 << 10) == 1 && mallopt(M_TOP_PAD, 0) == 1,
                   "mallopt");
        malloc_trim(0);
        int mapped_rounds = 0;
        for (int round = 0; round < 1000; ++round) {
          if (round == 500) {
            RANK_CHECK(mallopt(M_MMAP_THRESHOLD, 4 << 20) == 1, "mallopt");
            RANK_CHECK(mallopt(M_TRIM_THRESHOLD, 64 << 20) == 1, "mallopt");
          }
          const size_t floats = kFloats + static_cast<size_t>(round % 3) * 4096;
          const size_t mappings = mallinfo2().hblks;
          auto* in = static_cast<float*>(std::malloc(floats * sizeof(float)));
          auto* out = static_cast<float*>(std::malloc(floats * sizeof(float)));
          if (mallinfo2().hblks == mappings + 2) ++mapped_rounds;
          for (size_t i = 0; i < floats; ++i)
            in[i] = static_cast<float>((i + static_cast<size_t>(round)) % 1000 + rank);
          collectives::CollectiveArgs args;
          args.send = in;
          args.recv = out;
          args.count = floats;
          args.type = DataType::float32;
          const Status status =
              context.run(context.world(), collectives::Collective::allreduce, args);
          RANK_CHECK(status.ok(), status.to_string());
          for (size_t i = 0; i < floats; ++i) {
            const float want =
                static_cast<float>(2 * ((i + static_cast<size_t>(round)) % 1000) + 1);
            if (out[i] != want) {
              RANK_CHECK(false,
                         "round " + std::to_string(round) + ", element " + std::to_string(i));
            }
          }
          std::free(out);
          std::free(in);
        }
        const auto c = context.counters();
        const std::string counts = ": hits " + std::to_string(c.registration_hits) + ", misses " +
                                   std::to_string(c.registration_misses) + ", unmapped " +
                                   std::to_string(c.registrations_unmapped) +
                                   ", rounds on new mappings " + std::to_string(mapped_rounds);
        RANK_CHECK(c.registration_hits > 0, "the cache never served a buffer" + counts);
        RANK_CHECK(c.registration_misses > 0, "nothing was ever registered" + counts);
        RANK_CHECK(mapped_rounds > 0, "malloc never mapped the buffers" + counts);
        RANK_CHECK(c.registrations_unmapped > 0, "no freed buffer was ever dropped" + counts);
        return 0;
      },
      cached_rendezvous()));
}

}  // namespace
}  // namespace ibcoll::testing
