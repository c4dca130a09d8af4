// The node's slot directory (transport/shm/slot_binding.h), in one process's shared memory (a
// memfd, sparse as the node's segment is): the members of one communicator share an entry, and
// communicators with one id and one stamp (two agreements of different members whose stamps
// happened to be equal) do not; an abandoned communicator's entry is free once those that bound
// it let go, whoever never came, and any entry once those that have not let go are dead; a freed
// set keeps its pages for the next communicator, up to SlotRegion::kWarmSets of them, and the
// others give theirs back.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <vector>

#include "transport/shm/slot_binding.h"

namespace ibcoll::transport::shm {
namespace {

struct Region {
  static constexpr int kLocalRanks = 3;
  Region() : bytes(SlotRegion::bytes(kLocalRanks)), region(map(bytes), kLocalRanks, pids) {}
  ~Region() { munmap(&region.directory(), bytes); }  // the directory starts the region
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  static std::byte* map(size_t bytes) {
    const int fd = memfd_create("slot-binding-test", 0);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(bytes)), 0);
    void* memory = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    EXPECT_NE(memory, MAP_FAILED);
    return static_cast<std::byte*>(memory);
  }
  // Whole pages of `set` (not those it shares with a neighbour) that hold memory.
  size_t resident_pages(int set) const {
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const auto begin = (reinterpret_cast<uintptr_t>(&region.slot(set, 0)) + page - 1) / page * page;
    const auto end =
        reinterpret_cast<uintptr_t>(&region.slot(set, kLocalRanks - 1) + 1) / page * page;
    std::vector<unsigned char> resident((end - begin + page - 1) / page);
    EXPECT_EQ(mincore(reinterpret_cast<void*>(begin), end - begin, resident.data()), 0);
    size_t pages = 0;
    for (unsigned char r : resident)
      pages += r & 1;
    return pages;
  }
  // What a small call and a staged one write in every slot of `set`.
  void use(int set) const {
    for (int l = 0; l < kLocalRanks; ++l) {
      SlotRegion::Slot& slot = region.slot(set, l);
      slot.buffers[0].ready = 1;
      slot.buffers[0].data[0] = std::byte{1};
      slot.staging.contributed = 1;
      slot.staging.halves[1][SlotRegion::kStagingHalfBytes - 1] = std::byte{1};
    }
  }

  size_t bytes;
  pid_t pids[kLocalRanks] = {0, 0, 0};  // 0: not checked
  SlotRegion region;
};

// All members of communicator `id` bind it, from this one process.
std::vector<SlotBinding> bind_all(const Region& r, uint32_t id, uint64_t stamp) {
  static const std::vector<int> all = {0, 1, 2};
  std::vector<SlotBinding> members;
  for (int l : all)
    members.emplace_back(r.region, id, stamp, all, l);
  return members;
}

TEST(SlotBinding, MembersShareAnEntryAndOthersWithTheSameIdAndStampDoNot) {
  Region r;
  const std::vector<int> zero_two = {0, 2}, zero_one = {0, 1};
  SlotBinding a0(r.region, 5, 9, zero_two, 0), a2(r.region, 5, 9, zero_two, 2);
  EXPECT_EQ(a0.set(), a2.set());
  SlotBinding b1(r.region, 5, 9, zero_one, 1);  // same id, stamp and first member
  EXPECT_NE(b1.set(), a0.set());
  SlotBinding c0(r.region, 5, 10, zero_two, 0);  // a later stamp
  EXPECT_NE(c0.set(), a0.set());
}

TEST(SlotBinding, AnAbandonedEntryIsFreeOnceItsBindersLetGo) {
  Region r;
  const std::vector<int> all = {0, 1, 2};
  int set = SlotRegion::kNoSet;
  {
    SlotBinding taker(r.region, 7, 3, all, 1);  // members 0 and 2 never bind
    set = taker.set();
    ASSERT_NE(set, SlotRegion::kNoSet);
    SlotBinding other(r.region, 8, 3, all, 1);
    EXPECT_NE(other.set(), set);  // the taker's set is held
    taker.abandon();
  }
  SlotBinding next(r.region, 9, 4, all, 0);
  EXPECT_EQ(next.set(), set) << "the abandoned entry still holds its set";
}

// A member died (a process that has exited) without letting go: once the others have, the entry
// is free, so that the survivors' communicators do not leak the node's sets one by one. While
// it lives, it holds the set.
TEST(SlotBinding, AnEntryIsFreeOnceTheLivingLetGoOfIt) {
  Region r;
  const std::vector<int> all = {0, 1, 2};
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  int set = SlotRegion::kNoSet;
  {
    SlotBinding first(r.region, 7, 3, all, 0), second(r.region, 7, 3, all, 1);
    set = first.set();
    ASSERT_NE(set, SlotRegion::kNoSet);
    r.pids[2] = getpid();  // member 2 lives (it never bound, as if it were still on its way)
  }
  SlotBinding held(r.region, 9, 4, all, 0);
  EXPECT_NE(held.set(), set) << "a set was freed while a member that holds it lives";
  {
    SlotBinding first(r.region, 10, 5, all, 0), second(r.region, 10, 5, all, 1);
    set = first.set();
    r.pids[2] = dead;  // member 2 dies before it binds
  }
  SlotBinding next(r.region, 11, 6, all, 0);
  EXPECT_EQ(next.set(), set) << "the dead member's entry still holds its set";
}

// A loop that makes, uses and frees a communicator takes the same set each time, its pages still
// there: no page faults on every member for each new communicator, and nothing of the last one's
// calls left to be taken for the new one's.
TEST(SlotBinding, AFreedSetKeepsItsPagesForTheNextCommunicator) {
  Region r;
  int set = SlotRegion::kNoSet;
  {
    auto first = bind_all(r, 5, 2);
    set = first[0].set();
    ASSERT_NE(set, SlotRegion::kNoSet);
    r.use(set);
  }
  const size_t pages = r.resident_pages(set);
  EXPECT_GE(pages, 3u * Region::kLocalRanks) << "the freed set gave its pages back";
  auto next = bind_all(r, 6, 3);
  EXPECT_EQ(next[0].set(), set);
  EXPECT_EQ(r.resident_pages(set), pages);
  for (int l = 0; l < Region::kLocalRanks; ++l) {
    EXPECT_EQ(r.region.slot(set, l).buffers[0].ready, 0u);
    EXPECT_EQ(r.region.slot(set, l).staging.contributed, 0u);
  }
}

// Freed sets beyond the warm ones give their pages back, so what freed sets hold stays bounded
// whatever the program once held; the next communicator takes a warm one.
TEST(SlotBinding, FreedSetsBeyondTheWarmOnesGiveTheirPagesBack) {
  Region r;
  constexpr int kUsed = SlotRegion::kWarmSets + 3;
  {
    std::vector<std::vector<SlotBinding>> live;
    for (int c = 0; c < kUsed; ++c) {
      live.push_back(bind_all(r, static_cast<uint32_t>(10 + c), 2));
      r.use(live.back()[0].set());
    }
    for (int s = 0; s < kUsed; ++s)
      EXPECT_GT(r.resident_pages(s), 0u) << "set " << s;
    live.erase(live.begin());  // the lowest set goes first: the others are freed above it
  }
  int warm = 0;
  for (int s = 0; s < kUsed; ++s)
    warm += r.resident_pages(s) > 0;
  EXPECT_EQ(warm, SlotRegion::kWarmSets);
  EXPECT_GT(r.resident_pages(0), 0u);
  auto next = bind_all(r, 20, 3);
  EXPECT_GT(r.resident_pages(next[0].set()), 0u) << "set " << next[0].set() << " is cold";
}

}  // namespace
}  // namespace ibcoll::transport::shm
