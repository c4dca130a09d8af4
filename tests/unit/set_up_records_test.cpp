// The set-up exchanges' records (runtime/set_up_records.h): what a rank writes reads back the
// same; what another version or a broken rank sent is an error naming that rank, never a
// crash or a foreign exception (the fuzz target tries far more).
#include "runtime/set_up_records.h"

#include <gtest/gtest.h>

namespace ibcoll::runtime {
namespace {

// The error `read` throws: its code, and its message holding `words`.
template <typename Read>
void expect_error(Read read, Code code, const std::string& words) {
  try {
    read();
    ADD_FAILURE() << "no error; wanted one saying " << words;
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), code) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(SetUpRecords, StepPartsGiveTheResultsOrTheFirstFailure) {
  EXPECT_EQ(results_of_step("s", {ok_part("a"), ok_part("")}), (std::vector<std::string>{"a", ""}));
  const std::string failed = failed_part(Status(Code::system_error, "no room"), "n7");
  expect_error(
      [&] {
        results_of_step("shm-created", {ok_part("a"), failed});
      },
      Code::system_error, "set-up (shm-created) failed on rank 1, host n7: no room");
  // Garbage, and a code no version has: internal, naming the rank.
  for (const std::string& odd : {std::string(), std::string("x"), std::string("e99999999999:z"),
                                 std::string("e-3:z"), std::string("e:z"), std::string("e2")}) {
    expect_error(
        [&] {
          results_of_step("start", {ok_part("a"), odd});
        },
        Code::internal, "failed on rank 1");
  }
}

TEST(SetUpRecords, EachRecordReadsBackWhatWasWritten) {
  const StartRecord start = read_start_record(start_record({"secret", "A=1\nB=2"}));
  EXPECT_EQ(start.secret, "secret");
  EXPECT_EQ(start.settings, "A=1\nB=2");
  const PlaceRecord place = read_place_record(place_record({"node-3", "0-3,8", -1}), 2);
  EXPECT_EQ(place.node, "node-3");
  EXPECT_EQ(place.cpus, "0-3,8");
  EXPECT_EQ(place.package, -1);
  const SingleCopyRecord verdict =
      read_single_copy_record(single_copy_record({65536, 0, true, "8K 1.3 / 4.5\nmore"}), 0);
  EXPECT_EQ(verdict.from, 65536u);
  EXPECT_EQ(verdict.below, 0u);
  EXPECT_TRUE(verdict.refused);
  EXPECT_EQ(verdict.summary, "8K 1.3 / 4.5\nmore");
}

TEST(SetUpRecords, MalformedRecordsNameTheirRank) {
  for (const char* odd : {"", "node", "node\n0-3", "node\n0-3\nx", "node\n0-3\n1\n", "a\nb\n1x"})
    expect_error([&] { read_place_record(odd, 5); }, Code::mismatch, "rank 5's placement");
  for (const char* odd : {"", "1 2 0", "1 2\nx", "x 2 0\ns", "1 2 2\ns", "1 -2 0\ns", "1  2 0\ns"})
    expect_error([&] { read_single_copy_record(odd, 4); }, Code::mismatch,
                 "rank 4's single-copy verdict");
}

// Lines that are no NAME=VALUE, or fewer lines than rank 0's: still a difference, named.
TEST(SetUpRecords, OddSettingsAreDifferencesNotCrashes) {
  EXPECT_NO_THROW(check_shared_settings({"A=1\nB=2", "A=1\nB=2"}));
  expect_error(
      [] {
        check_shared_settings({"A=1\nB=2", "A=1"});
      },
      Code::invalid_argument, "B: rank 0 has 2, rank 1 has none");
  expect_error(
      [] {
        check_shared_settings({"A=1", "x"});
      },
      Code::invalid_argument, "A: rank 0 has 1, rank 1 has x");
  expect_error(
      [] {
        check_shared_settings({"A", "AB"});
      },
      Code::invalid_argument, "A: rank 0 has A, rank 1 has AB");
}

}  // namespace
}  // namespace ibcoll::runtime
