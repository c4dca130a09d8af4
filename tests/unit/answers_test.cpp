// The rendezvous answers between a shared-memory sender and receiver (transport/shm/answers.h):
// a sender giving a message up while the receiver reads it waits, and past its patience
// abandons it; the receiver's answer after its read then fails, so it drops what it read (the
// sender's buffer is the caller's again and may have changed). Entries are reused for later
// ids, whose state an old answer never touches.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "transport/shm/answers.h"

namespace ibcoll::transport::shm {
namespace {

TEST(Answers, AWithdrawalBeforeTheClaimWins) {
  std::vector<std::byte> memory(Answers::kBytes);
  const Answers a(memory.data());
  a.open(5);
  EXPECT_EQ(a.withdraw(5), Answers::withdrawn);
  EXPECT_FALSE(a.claim(5));
}

TEST(Answers, AReaderAbandonedMidReadCannotAnswer) {
  std::vector<std::byte> memory(Answers::kBytes);
  const Answers a(memory.data());
  a.open(7);
  ASSERT_TRUE(a.claim(7));
  EXPECT_EQ(a.withdraw(7), Answers::reading);  // the sender must wait
  EXPECT_EQ(a.abandon(7), Answers::withdrawn);
  EXPECT_FALSE(a.answer(7, Answers::done));
  EXPECT_EQ(a.answer_to(7), Answers::withdrawn);
}

TEST(Answers, AnAnswerBeforeTheAbandonStands) {
  std::vector<std::byte> memory(Answers::kBytes);
  const Answers a(memory.data());
  a.open(9);
  ASSERT_TRUE(a.claim(9));
  EXPECT_TRUE(a.answer(9, Answers::refused));
  EXPECT_EQ(a.abandon(9), Answers::refused);
}

TEST(Answers, AnOldAnswerDoesNotTouchTheEntrysNextId) {
  std::vector<std::byte> memory(Answers::kBytes);
  const Answers a(memory.data());
  a.open(3);
  ASSERT_TRUE(a.claim(3));
  EXPECT_EQ(a.abandon(3), Answers::withdrawn);
  a.open(3 + Answers::kEntries);  // the same entry
  EXPECT_FALSE(a.answer(3, Answers::done));
  EXPECT_EQ(a.answer_to(3 + Answers::kEntries), Answers::pending);
}

}  // namespace
}  // namespace ibcoll::transport::shm
