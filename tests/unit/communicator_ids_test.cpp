// A process's communicator ids and stamps (runtime/communicator_ids.h): an id is held while its
// communicator lives and free once it is freed; next() is above every id held; the stamp moves
// past every stamp seen and every sequence number a freed communicator took; when next() runs
// past the largest id, the lowest id free on every member comes from their bitmaps.
#include <gtest/gtest.h>

#include "base/status.h"
#include "runtime/communicator_ids.h"

namespace ibcoll::runtime {
namespace {

TEST(CommunicatorIds, AnIdIsHeldWhileItsCommunicatorLives) {
  CommunicatorIds ids(100);
  EXPECT_FALSE(ids.free(0));  // the node calibration's
  EXPECT_FALSE(ids.free(1));  // the world's
  EXPECT_EQ(ids.next(), 2u);
  ids.hold(2, ids.stamp());
  EXPECT_FALSE(ids.free(2));
  EXPECT_EQ(ids.next(), 3u);
  EXPECT_THROW(ids.hold(2, ids.stamp()), Error);
  ids.hold(7, ids.stamp());
  EXPECT_EQ(ids.next(), 8u);
  ids.release(7, 10);
  EXPECT_TRUE(ids.free(7));
  EXPECT_EQ(ids.next(), 3u);
  ids.release(2, 10);
  EXPECT_EQ(ids.next(), 2u);
  EXPECT_FALSE(ids.free(101));
  EXPECT_THROW(ids.hold(101, 1), Error);
}

TEST(CommunicatorIds, TheStampPassesEveryStampSeenAndEverySequenceTaken) {
  CommunicatorIds ids(100);
  const uint64_t first = ids.stamp();
  ids.see(first + 40);
  EXPECT_EQ(ids.stamp(), first + 41);
  ids.hold(2, ids.stamp());
  EXPECT_EQ(ids.stamp(), first + 42);
  ids.release(2, first + 1000);  // its calls took sequence numbers up to first + 999
  EXPECT_EQ(ids.stamp(), first + 1000);
  ids.see(5);  // an older stamp changes nothing
  EXPECT_EQ(ids.stamp(), first + 1000);
}

// An agreement's stamp chosen from stamps given before this process freed its last communicator
// with the id (an MPI library's agreements run beside the program's frees) is refused for that
// id: the new communicator's sequence numbers would start below the old one's.
TEST(CommunicatorIds, AStampBelowTheIdsLastSequenceNumbersIsRefused) {
  CommunicatorIds ids(100);
  const uint64_t voted = ids.stamp();
  ids.hold(4, voted);
  ids.release(4, voted + 500);
  EXPECT_THROW(ids.hold(4, voted + 1), Error);
  EXPECT_TRUE(ids.free(4));
  ids.hold(4, ids.stamp());
  EXPECT_FALSE(ids.free(4));
  ids.hold(5, voted);  // another id: nothing to keep apart from
}

TEST(CommunicatorIds, TheLowestIdFreeOnEveryMemberFromTheirBitmaps) {
  CommunicatorIds a(100), b(100);
  a.hold(2, 1);
  a.hold(100, 1);  // next() is past the largest
  b.hold(3, 1);
  EXPECT_EQ(a.next(), 101u);
  std::vector<uint64_t> either = a.held_bitmap();
  const std::vector<uint64_t> theirs = b.held_bitmap();
  for (size_t w = 0; w < either.size(); ++w)
    either[w] |= theirs[w];
  EXPECT_EQ(a.lowest_clear(either), 4u);
  for (uint32_t id = 4; id < 100; ++id)
    a.hold(id, 1);
  EXPECT_EQ(a.lowest_clear(a.held_bitmap()), 3u);
  a.hold(3, 1);
  EXPECT_EQ(a.lowest_clear(a.held_bitmap()), 0u);  // none left
}

}  // namespace
}  // namespace ibcoll::runtime
