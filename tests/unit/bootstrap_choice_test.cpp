// IBCOLL_BOOTSTRAP and the launcher's environment → the bootstrap a rank takes: PMIx where a
// PMIx launcher started the process, the TCP store where an address is given, a singleton
// where no launcher (or one of a single rank) started it; anything else a clear error.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <map>
#include <string>

#include "base/status.h"
#include "runtime/bootstrap/bootstrap_choice.h"
#include "tests/support/forked_ranks.h"

namespace ibcoll::runtime {
namespace {

using Kind = BootstrapChoice::Kind;
using Environment = std::map<std::string, std::string>;

BootstrapChoice choose(const std::string& setting, const Environment& environment) {
  return choose_bootstrap(setting, [&](const char* name) -> const char* {
    const auto it = environment.find(name);
    return it == environment.end() ? nullptr : it->second.c_str();
  });
}

// The error's text, or "" when there was none.
std::string error_of(const std::string& setting, const Environment& environment) {
  try {
    choose(setting, environment);
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), Code::invalid_argument) << e.what();
    return e.what();
  }
  return "";
}

const Environment kMpirun = {{"PMIX_NAMESPACE", "952762369"},
                             {"PMIX_RANK", "1"},
                             {"OMPI_COMM_WORLD_RANK", "1"},
                             {"OMPI_COMM_WORLD_SIZE", "4"}};
const Environment kSrunWithoutPmix = {{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "4"}};

TEST(BootstrapChoice, AutoTakesPmixWhereAPmixLauncherStartedTheProcess) {
  for (const std::string setting : {"", "auto"}) {
    const BootstrapChoice choice = choose(setting, kMpirun);
    EXPECT_EQ(choice.kind, Kind::pmix);
    EXPECT_NE(choice.reason.find("PMIX_NAMESPACE"), std::string::npos) << choice.reason;
  }
  EXPECT_EQ(choose("auto", {{"PMIX_NAMESPACE", "slurm.pmix.39.0"}, {"PMIX_RANK", "0"}}).kind,
            Kind::pmix);
}

TEST(BootstrapChoice, AutoRunsAJobOfOneRankAlone) {
  EXPECT_EQ(choose("auto", {}).kind, Kind::singleton);
  EXPECT_EQ(choose("", {{"IBCOLL_RANK", "0"}, {"IBCOLL_SIZE", "1"}}).kind, Kind::singleton);
  EXPECT_EQ(choose("", {{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}}).kind, Kind::singleton);
}

TEST(BootstrapChoice, AutoWithSeveralRanksAndNoPmixSaysWhatToDo) {
  const std::string error = error_of("auto", kSrunWithoutPmix);
  EXPECT_NE(error.find("IBCOLL_BOOTSTRAP: 4 ranks and no PMIx server"), std::string::npos) << error;
  EXPECT_NE(error.find("srun --mpi=pmix"), std::string::npos) << error;
  EXPECT_NE(error.find("tcp://host:port"), std::string::npos) << error;
  // A half-set launcher pair is named as before.
  EXPECT_NE(error_of("", {{"IBCOLL_RANK", "0"}}).find("IBCOLL_SIZE is unset"), std::string::npos);
}

TEST(BootstrapChoice, AnAddressMeansTheTcpStoreEvenUnderPmix) {
  for (const std::string setting : {"tcp://node1:29500", "node1:29500"}) {
    const BootstrapChoice choice = choose(setting, kMpirun);
    EXPECT_EQ(choice.kind, Kind::tcp);
    EXPECT_EQ(choice.address, "node1:29500");
  }
  EXPECT_EQ(choose("tcp://[::1]:80", kMpirun).address, "[::1]:80");
  EXPECT_EQ(choose("tcp://[::1]:80", kMpirun).launch.size, 4);
  EXPECT_NE(error_of("tcp://node1:29500", {}).find("IBCOLL_RANK and IBCOLL_SIZE"),
            std::string::npos);
  EXPECT_EQ(choose("pmix", {}).kind, Kind::pmix);  // forced: opening it fails without a server
}

TEST(BootstrapChoice, AMalformedSettingNamesTheVariable) {
  for (const std::string setting : {"pmi", "tcp://node1", "tcp://node1:0", "PMIX"}) {
    const std::string error = error_of(setting, kMpirun);
    EXPECT_NE(error.find("IBCOLL_BOOTSTRAP"), std::string::npos) << setting << ": " << error;
  }
}

#ifdef IBCOLL_HAVE_PMIX
// PMIx asked for where no launcher serves it: a clear error at once, not a wait.
TEST(BootstrapChoice, PmixWithoutAServerFailsSayingSo) {
  auto exits = testing::run_ranks(1, [](int, int) {
    for (const char* name : {"PMIX_NAMESPACE", "PMIX_RANK", "PMIX_SERVER_URI41", "PMIX_SERVER_URI4",
                             "PMIX_SERVER_URI3", "PMIX_SERVER_URI21", "PMIX_SERVER_URI2"})
      unsetenv(name);
    const auto start = std::chrono::steady_clock::now();
    try {
      open_bootstrap(choose("pmix", {}), std::chrono::seconds(5));
      RANK_CHECK(false, "PMIx opened without a server");
    } catch (const Error& e) {
      RANK_CHECK(e.status().code() == Code::not_supported, e.what());
      RANK_CHECK(std::string(e.what()).find("no PMIx server") != std::string::npos, e.what());
    }
    RANK_CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(3), "it waited");
    return 0;
  });
  for (auto& e : exits)
    EXPECT_TRUE(e.ok()) << testing::describe(exits);
}
#endif

}  // namespace
}  // namespace ibcoll::runtime
