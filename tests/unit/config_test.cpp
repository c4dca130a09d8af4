// Config: defaults, every parser, and errors that name the variable at fault.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/deadline.h"
#include "base/status.h"
#include "runtime/bootstrap/launch_env.h"
#include "runtime/config.h"
#include "runtime/set_up_records.h"

namespace ibcoll::runtime {
namespace {

auto lookup_in(const std::map<std::string, std::string>& env) {
  return [env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

void expect_error_naming(const std::map<std::string, std::string>& env, const std::string& name) {
  try {
    Config::from_environment(lookup_in(env));
    FAIL() << "accepted " << name;
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::invalid_argument);
    EXPECT_NE(std::string(e.what()).find(name), std::string::npos) << e.what();
  }
}

TEST(Config, DefaultsComeFromTheTable) {
  Config c = Config::from_environment(lookup_in({}));
  EXPECT_EQ(c.log_level, log::Level::warn);
  EXPECT_EQ(c.timeout, std::chrono::minutes(10));  // for hangs: a slow rank is waited for
  EXPECT_EQ(c.wait, transport::WaitPolicy::adaptive);
  EXPECT_EQ(c.verbs.eager_limit, 65536u);
  EXPECT_EQ(c.verbs.eager_buffer, 8192u);
  EXPECT_EQ(c.verbs.srq_depth, 512u);
  EXPECT_EQ(c.verbs.gid_index, -1);
  EXPECT_EQ(c.verbs.xrc, transport::verbs::XrcMode::automatic);
  EXPECT_EQ(c.verbs.mr_cache, transport::verbs::CacheMode::automatic);
  EXPECT_TRUE(c.connect_planned);
  EXPECT_TRUE(c.calibrate_single_copy);
  for (const Variable& v : config_variables()) {
    EXPECT_EQ(std::string(v.name).rfind("IBCOLL_", 0), 0u);
    EXPECT_NE(std::string(v.description), "");
  }
}

TEST(Config, ParsesEveryKind) {
  Config c = Config::from_environment(lookup_in({{"IBCOLL_LOG", "debug"},
                                                 {"IBCOLL_TIMEOUT", "1500ms"},
                                                 {"IBCOLL_WAIT", "event"},
                                                 {"IBCOLL_GID_INDEX", "3"},
                                                 {"IBCOLL_XRC", "off"},
                                                 {"IBCOLL_EAGER_LIMIT", "4k"},
                                                 {"IBCOLL_EAGER_BUFFER", "1k"},
                                                 {"IBCOLL_SRQ_DEPTH", "64"},
                                                 {"IBCOLL_MR_CACHE", "1"},
                                                 {"IBCOLL_MR_CACHE_SIZE", "2G"},
                                                 {"IBCOLL_KEEPALIVE", "2s"},
                                                 {"IBCOLL_CONNECT", "on_demand"}}));
  EXPECT_EQ(c.log_level, log::Level::debug);
  EXPECT_FALSE(c.connect_planned);
  EXPECT_EQ(c.timeout, std::chrono::milliseconds(1500));
  EXPECT_EQ(c.verbs.timeout, std::chrono::milliseconds(1500));
  EXPECT_TRUE(c.verbs.event_channel);
  EXPECT_EQ(c.verbs.gid_index, 3);
  EXPECT_EQ(c.verbs.xrc, transport::verbs::XrcMode::off);
  EXPECT_EQ(c.verbs.eager_limit, 4096u);
  EXPECT_EQ(c.verbs.eager_buffer, 1024u);
  EXPECT_EQ(c.verbs.srq_depth, 64u);
  EXPECT_EQ(c.verbs.mr_cache, transport::verbs::CacheMode::on);
  EXPECT_EQ(Config::from_environment(lookup_in({{"IBCOLL_MR_CACHE", "off"}})).verbs.mr_cache,
            transport::verbs::CacheMode::off);
  EXPECT_EQ(c.verbs.mr_cache_bytes, size_t{2} << 30);
  EXPECT_EQ(c.verbs.keepalive, std::chrono::seconds(2));
}

// IBCOLL_SHM_SINGLE_COPY: a window of sizes, a lower bound alone, or none; each is taken as
// given (no calibration), and written back the same way.
TEST(Config, SingleCopySizesAreAWindow) {
  using transport::shm::SingleCopySizes;
  const auto sizes = [](const char* text) {
    const Config c = Config::from_environment(lookup_in({{"IBCOLL_SHM_SINGLE_COPY", text}}));
    EXPECT_FALSE(c.calibrate_single_copy);
    return c.shm.single_copy;
  };
  EXPECT_EQ(sizes("64K-2M"), (SingleCopySizes{64 << 10, 2 << 20}));
  EXPECT_EQ(sizes("4096"), (SingleCopySizes{4096, SingleCopySizes::kUnbounded}));
  EXPECT_EQ(sizes("0"), SingleCopySizes{});
  EXPECT_FALSE(sizes("64K-2M").holds(2 << 20));
  EXPECT_TRUE(sizes("64K-2M").holds((2 << 20) - 1));
  EXPECT_FALSE(sizes("64K-2M").holds((64 << 10) - 1));
  EXPECT_FALSE(sizes("0").holds(1 << 20));
  for (const char* text : {"64K-2M", "64K", "0", "1000-3000"})
    EXPECT_EQ(parse_single_copy(text).text(), text);
}

// IBCOLL_TIMEOUT=0 turns the deadline off: a century, long enough never to pass and short
// enough that a deadline computed from it does not overflow the clock.
TEST(Config, ATimeoutOfZeroIsNone) {
  Config c = Config::from_environment(lookup_in({{"IBCOLL_TIMEOUT", "0"}}));
  EXPECT_EQ(c.timeout, kNoTimeout);
  EXPECT_GT(c.timeout, std::chrono::hours(24 * 365 * 50));
  EXPECT_GT(Deadline(c.timeout).remaining(), std::chrono::hours(24 * 365 * 50));
}

TEST(Config, BadValuesNameTheirVariable) {
  expect_error_naming({{"IBCOLL_LOG", "loud"}}, "IBCOLL_LOG");
  expect_error_naming({{"IBCOLL_TIMEOUT", "soon"}}, "IBCOLL_TIMEOUT");
  expect_error_naming({{"IBCOLL_TIMEOUT", "0s"}}, "IBCOLL_TIMEOUT");
  expect_error_naming({{"IBCOLL_WAIT", "sleepy"}}, "IBCOLL_WAIT");
  expect_error_naming({{"IBCOLL_GID_INDEX", "-2"}}, "IBCOLL_GID_INDEX");
  expect_error_naming({{"IBCOLL_XRC", "maybe"}}, "IBCOLL_XRC");
  expect_error_naming({{"IBCOLL_CM", "tcp"}}, "IBCOLL_CM");
  expect_error_naming({{"IBCOLL_CONNECT", "eager"}}, "IBCOLL_CONNECT");
  expect_error_naming({{"IBCOLL_EAGER_LIMIT", "2G"}}, "IBCOLL_EAGER_LIMIT");
  expect_error_naming({{"IBCOLL_EAGER_BUFFER", "8"}}, "IBCOLL_EAGER_BUFFER");
  expect_error_naming({{"IBCOLL_SRQ_DEPTH", "0"}}, "IBCOLL_SRQ_DEPTH");
  expect_error_naming({{"IBCOLL_CREDITS", "0"}}, "IBCOLL_CREDITS");
  expect_error_naming({{"IBCOLL_MR_CACHE", "perhaps"}}, "IBCOLL_MR_CACHE");
  for (const char* text : {"0", "1025", "often"})
    expect_error_naming({{"IBCOLL_FULL_CHECK_EVERY", text}}, "IBCOLL_FULL_CHECK_EVERY");
  for (const char* text : {"0ms", "soon"})
    expect_error_naming({{"IBCOLL_PROBE_AFTER", text}}, "IBCOLL_PROBE_AFTER");
  for (const char* text : {"big", "2M-64K", "64K-", "64K-64K"})
    expect_error_naming({{"IBCOLL_SHM_SINGLE_COPY", text}}, "IBCOLL_SHM_SINGLE_COPY");
  for (const char* text : {"33K", "1M", "measured"})  // beyond a slot's buffer, or not a size
    expect_error_naming({{"IBCOLL_ALLREDUCE_SLOTS_MAX", text}}, "IBCOLL_ALLREDUCE_SLOTS_MAX");
  expect_error_naming({{"IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", "-1"}},
                      "IBCOLL_ALLREDUCE_SINGLE_COPY_FROM");
  for (const char* text : {"2", "65536", "many"})
    expect_error_naming({{"IBCOLL_COMM_IDS", text}}, "IBCOLL_COMM_IDS");
  for (const char* text : {"single_copy", "single_copy=fast", "slots=early,", "cma=wins"})
    expect_error_naming({{"IBCOLL_CALIBRATION_PRETEND", text}}, "IBCOLL_CALIBRATION_PRETEND");
  for (const char* text : {"node_calibration", "qp-error:", "qp-error:0", "qp-error:soon",
                           "agreement-exit:", "agreement-exit:-1"})
    expect_error_naming({{"IBCOLL_FAULT", text}}, "IBCOLL_FAULT");
}

// A fault point for tests: named, and for qp-error the work request it strikes after, for
// agreement-exit the agreement message.
TEST(Config, FaultPointsAreParsed) {
  EXPECT_EQ(Config::from_environment(lookup_in({})).fault, Config::Fault::none);
  const Config qp = Config::from_environment(lookup_in({{"IBCOLL_FAULT", "qp-error:40"}}));
  EXPECT_EQ(qp.fault, Config::Fault::qp_error);
  EXPECT_EQ(qp.fault_after, 40u);
#ifdef IBCOLL_HAVE_VERBS
  EXPECT_EQ(qp.verbs.error_qp_after, 40u);
#endif
  const Config exit = Config::from_environment(lookup_in({{"IBCOLL_FAULT", "agreement-exit:2"}}));
  EXPECT_EQ(exit.fault, Config::Fault::agreement_exit);
  EXPECT_EQ(exit.fault_after, 2u);
#ifdef IBCOLL_HAVE_VERBS
  EXPECT_EQ(exit.verbs.error_qp_after, 0u);
#endif
}

// The node-local allreduce thresholds: measured unless set (auto, the default); set, taken as
// given, 0 turning single copy off.
TEST(Config, AllreduceThresholdsAreMeasuredUnlessSet) {
  const Config measured = Config::from_environment(lookup_in({}));
  EXPECT_TRUE(measured.calibrate_slots_allreduce && measured.calibrate_single_copy_allreduce);
  const Config set = Config::from_environment(lookup_in(
      {{"IBCOLL_ALLREDUCE_SLOTS_MAX", "32K"}, {"IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", "0"}}));
  EXPECT_FALSE(set.calibrate_slots_allreduce || set.calibrate_single_copy_allreduce);
  EXPECT_EQ(set.policy.tuning.slots_allreduce_max, size_t{32} << 10);
  EXPECT_EQ(set.policy.tuning.single_copy_allreduce_from, 0u);
}

// Settings the ranks must share: one rank set differently from the others in any of them is
// named in the error of the set-up exchange (check_shared_settings), with both values.
TEST(Config, EverySettingTheRanksMustShareIsChecked) {
  std::map<std::string, std::string> differing = {
      {"IBCOLL_TRANSPORT", "shm"},
      {"IBCOLL_ALLREDUCE_ALGO", "ring"},
      {"IBCOLL_BCAST_ALGO", "chain"},
      {"IBCOLL_CHECK_CALLS", "0"},
      {"IBCOLL_FULL_CHECK_EVERY", "1"},
      {"IBCOLL_SHM_SLOTS", "0"},
      {"IBCOLL_SHM_SINGLE_COPY", "64K"},
      {"IBCOLL_ALLREDUCE_SLOTS_MAX", "4K"},
      {"IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", "0"},
      {"IBCOLL_CALIBRATION_PRETEND", "slots=early"},
      {"IBCOLL_COMM_IDS", "100"},
#ifdef IBCOLL_HAVE_VERBS
      {"IBCOLL_CM", "rdmacm"},
      {"IBCOLL_XRC", "off"},
      {"IBCOLL_EAGER_BUFFER", "4k"},
#endif
  };
  const std::string usual = Config::from_environment(lookup_in({})).shared_settings();
  EXPECT_NO_THROW(check_shared_settings({usual, usual, usual}));
  for (const auto& [name, value] : differing) {
    const std::string odd = Config::from_environment(lookup_in({{name, value}})).shared_settings();
    try {
      check_shared_settings({usual, odd, usual});
      ADD_FAILURE() << name << " set differently on rank 1 went unnoticed";
    } catch (const Error& e) {
      EXPECT_EQ(e.status().code(), Code::invalid_argument);
      EXPECT_NE(std::string(e.what()).find(name + ": rank 0 has "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("rank 1 has"), std::string::npos) << e.what();
    }
  }
}

TEST(LaunchEnv, ReadsIbcollThenLauncherVariables) {
  auto info = launch_info_from_environment(
      lookup_in({{"IBCOLL_RANK", "2"}, {"IBCOLL_SIZE", "4"}, {"IBCOLL_JOB_SECRET", "s"}}));
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.size, 4);
  EXPECT_EQ(info.secret, "s");
  info = launch_info_from_environment(
      lookup_in({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "3"}}));
  EXPECT_EQ(info.rank, 1);
  info = launch_info_from_environment(lookup_in({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "9"}}));
  EXPECT_EQ(info.size, 9);
}

TEST(LaunchEnv, MissingOrBadRankIsAClearError) {
  EXPECT_THROW(launch_info_from_environment(lookup_in({})), Error);
  try {
    launch_info_from_environment(lookup_in({{"IBCOLL_RANK", "4"}, {"IBCOLL_SIZE", "4"}}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("IBCOLL_RANK"), std::string::npos);
  }
  try {
    launch_info_from_environment(lookup_in({{"PMI_RANK", "0"}}));
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("PMI_SIZE"), std::string::npos);
  }
}

}  // namespace
}  // namespace ibcoll::runtime
