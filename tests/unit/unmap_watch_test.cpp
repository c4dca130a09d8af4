// UnmapWatch: every way memory leaves the address space is reported, with its range, before a
// registration cache looks again; a reader that fell more than the ring behind is told so.
#include "transport/ucx/unmap_watch.h"

#include <gtest/gtest.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>
#include <unistd.h>

#include <cstdlib>
#include <vector>

namespace ibcoll::transport::ucx {
namespace {

const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

std::byte* map_pages(size_t pages) {
  void* at =
      mmap(nullptr, pages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(at, MAP_FAILED);
  return static_cast<std::byte*>(at);
}

// The ranges reported since `from`.
std::vector<AddressRange> reported_since(uint64_t from) {
  std::vector<AddressRange> ranges;
  bool lost = false;
  UnmapWatch::since(
      from, [&](AddressRange r) { ranges.push_back(r); }, lost);
  EXPECT_FALSE(lost);
  return ranges;
}

// Whether [begin, end) lies inside one reported range.
bool covered(const std::vector<AddressRange>& ranges, const void* begin, size_t bytes) {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  for (const AddressRange& r : ranges)
    if (r.begin <= b && b + bytes <= r.end) return true;
  return false;
}

class UnmapWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
#ifdef IBCOLL_HAVE_UCX
    ASSERT_TRUE(UnmapWatch::watching()) << UnmapWatch::start();
#else
    GTEST_SKIP() << UnmapWatch::start();
#endif
  }
};

TEST_F(UnmapWatchTest, MunmapWholeAndPartIsReported) {
  std::byte* pages = map_pages(4);
  uint64_t from = UnmapWatch::position();
  munmap(pages + kPage, kPage);  // the second page alone
  auto ranges = reported_since(from);
  EXPECT_TRUE(covered(ranges, pages + kPage, kPage));
  EXPECT_FALSE(covered(ranges, pages, kPage)) << "the first page was reported gone too";
  from = UnmapWatch::position();
  munmap(pages, 4 * kPage);
  EXPECT_TRUE(covered(reported_since(from), pages + 2 * kPage, 2 * kPage));
}

TEST_F(UnmapWatchTest, MremapReportsTheOldRange) {
  std::byte* pages = map_pages(2);
  const uint64_t from = UnmapWatch::position();
  void* moved = mremap(pages, 2 * kPage, 64 * kPage, MREMAP_MAYMOVE);
  ASSERT_NE(moved, MAP_FAILED);
  if (moved != pages) {
    EXPECT_TRUE(covered(reported_since(from), pages, 2 * kPage));
  }
  munmap(moved, 64 * kPage);
}

TEST_F(UnmapWatchTest, MadviseDontneedIsReported) {
  std::byte* pages = map_pages(4);
  const uint64_t from = UnmapWatch::position();
  ASSERT_EQ(madvise(pages, 2 * kPage, MADV_DONTNEED), 0);
  EXPECT_TRUE(covered(reported_since(from), pages, 2 * kPage));
  munmap(pages, 4 * kPage);
}

TEST_F(UnmapWatchTest, ShmdtIsReported) {
  const int id = shmget(IPC_PRIVATE, 4 * kPage, IPC_CREAT | 0600);
  ASSERT_GE(id, 0);
  void* at = shmat(id, nullptr, 0);
  shmctl(id, IPC_RMID, nullptr);
  ASSERT_NE(at, reinterpret_cast<void*>(-1));
  const uint64_t from = UnmapWatch::position();
  shmdt(at);
  EXPECT_TRUE(covered(reported_since(from), at, 4 * kPage));
}

// A large malloc is glibc's own mmap; its free, glibc's own munmap, must be seen as well.
TEST_F(UnmapWatchTest, FreeOfALargeMallocIsReported) {
  if (!UnmapWatch::kSeesTheHeap) GTEST_SKIP() << "AddressSanitizer's heap is not watched";
  const size_t bytes = size_t{64} << 20;
  auto* buffer = static_cast<volatile char*>(std::malloc(bytes));
  ASSERT_NE(buffer, nullptr);
  buffer[0] = 1;
  buffer[bytes - 1] = 1;
  const auto* inner =
      reinterpret_cast<const std::byte*>(reinterpret_cast<uintptr_t>(buffer) + kPage);
  const uint64_t from = UnmapWatch::position();
  std::free(const_cast<char*>(buffer));
  EXPECT_TRUE(covered(reported_since(from), inner, bytes - 2 * kPage));
}

TEST_F(UnmapWatchTest, AReaderTooFarBehindIsToldItLostSome) {
  const uint64_t from = UnmapWatch::position();
  for (uint64_t i = 0; i < UnmapWatch::kRing + 10; ++i)
    munmap(map_pages(1), kPage);
  bool lost = false;
  size_t seen = 0;
  const uint64_t next = UnmapWatch::since(
      from, [&](AddressRange) { ++seen; }, lost);
  EXPECT_TRUE(lost);
  EXPECT_EQ(next, UnmapWatch::position());
  lost = false;
  EXPECT_EQ(UnmapWatch::since(
                next, [&](AddressRange) { ++seen; }, lost),
            next);
  EXPECT_FALSE(lost);
}

}  // namespace
}  // namespace ibcoll::transport::ucx
