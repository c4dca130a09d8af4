// The call check's fields on the wire (collectives/check_fields.h): calls that agree travel in
// the 24-byte form, and a mismatch still comes out named by its fields' ranges, through either
// form and across several folds.
#include <gtest/gtest.h>

#include <array>

#include "collectives/check_fields.h"

namespace ibcoll::collectives {
namespace {

CallSignature allreduce(uint64_t count) {
  return {Collective::allreduce, count, DataType::float32, ReduceOp::sum, 0, 77};
}
CallSignature bcast(uint64_t count, uint64_t root) {
  return {Collective::bcast, count, DataType::uint8, ReduceOp::sum, root, 77};
}

using Wire = std::array<std::byte, CheckFields::kFullBytes>;

// `from`'s wire form, and its length.
size_t write(const CheckFields& from, Wire& wire) {
  return from.write(wire.data());
}

TEST(CheckFields, AgreeingCallsTravelCompactAndAgree) {
  CheckFields mine(bcast(1000, 3)), theirs(bcast(1000, 3));
  Wire wire;
  ASSERT_EQ(write(theirs, wire), CheckFields::kCompactBytes);
  EXPECT_EQ(mine.fold(wire.data(), CheckFields::kCompactBytes), CheckFields::kCompactBytes);
  EXPECT_TRUE(mine.verdict().ok()) << mine.verdict().message();
  EXPECT_EQ(write(mine, wire), CheckFields::kCompactBytes);
}

TEST(CheckFields, ADifferenceIsNamedAndTravelsInFull) {
  CheckFields mine(bcast(1000, 3)), theirs(bcast(1000, 5));
  Wire wire;
  write(theirs, wire);
  mine.fold(wire.data(), CheckFields::kCompactBytes);
  EXPECT_EQ(mine.verdict().code(), Code::mismatch);
  EXPECT_NE(mine.verdict().message().find("root (3 vs 5)"), std::string::npos)
      << mine.verdict().message();
  // Passed on (a later step), the full form carries both ends of the range.
  ASSERT_EQ(write(mine, wire), CheckFields::kFullBytes);
  CheckFields third(bcast(1000, 4));
  EXPECT_EQ(third.fold(wire.data(), CheckFields::kFullBytes), CheckFields::kFullBytes);
  EXPECT_NE(third.verdict().message().find("root (3 vs 5)"), std::string::npos)
      << third.verdict().message();
}

TEST(CheckFields, EveryFieldSurvivesTheCompactForm) {
  CheckFields mine(allreduce(1)), theirs(bcast(uint64_t{1} << 40, 0xFFFFFFFF));
  Wire wire;
  ASSERT_EQ(write(theirs, wire), CheckFields::kCompactBytes);
  mine.fold(wire.data(), CheckFields::kCompactBytes);
  const std::string message = mine.verdict().message();
  EXPECT_NE(message.find("collective (allreduce vs bcast)"), std::string::npos) << message;
  EXPECT_NE(message.find("count (1 vs 1099511627776)"), std::string::npos) << message;
  EXPECT_NE(message.find("type (uint8 vs float32)"), std::string::npos) << message;
  EXPECT_NE(message.find("root (0 vs 4294967295)"), std::string::npos) << message;
  EXPECT_EQ(message.find("member list"), std::string::npos) << message;
}

TEST(CheckFields, ARootPastThirtyTwoBitsTravelsInFull) {
  CheckFields mine(bcast(8, uint64_t{1} << 32)), theirs(bcast(8, uint64_t{1} << 32));
  Wire wire;
  ASSERT_EQ(write(theirs, wire), CheckFields::kFullBytes);
  EXPECT_EQ(mine.fold(wire.data(), CheckFields::kFullBytes), CheckFields::kFullBytes);
  EXPECT_TRUE(mine.verdict().ok()) << mine.verdict().message();
}

TEST(CheckFields, AMessageTooShortForItsFormFoldsNothing) {
  CheckFields mine(bcast(8, 0)), theirs(bcast(9, 0)), differing(bcast(8, 1));
  Wire wire;
  write(theirs, wire);
  EXPECT_EQ(mine.fold(wire.data(), CheckFields::kCompactBytes - 1), 0u);
  EXPECT_EQ(mine.fold(wire.data(), 0), 0u);
  differing.fold(wire.data(), CheckFields::kCompactBytes);
  ASSERT_EQ(write(differing, wire), CheckFields::kFullBytes);
  EXPECT_EQ(mine.fold(wire.data(), CheckFields::kFullBytes - 1), 0u);
  EXPECT_TRUE(mine.verdict().ok()) << "nothing was folded in: " << mine.verdict().message();
}

}  // namespace
}  // namespace ibcoll::collectives
