// The job secret (IBCOLL_JOB_SECRET, which admits a client to the TCP store) never reaches the
// log: a job at the most talkative level, its store, set-up, calls and finalize, logs lines on
// every rank, and none holds the secret.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "tests/support/collectives.h"

namespace ibcoll::testing {
namespace {

TEST(Secrets, NoLogLineHoldsTheJobSecret) {
  RankOptions options;
  options.environment["IBCOLL_LOG"] = "trace";
  expect_all_ok(run_ranks(
      3,
      [](int me, int n) {
        const char* secret = std::getenv("IBCOLL_JOB_SECRET");
        RANK_CHECK(secret && std::string(secret).size() >= 16, "the launcher set no secret");
        // The log goes to stderr: into a file of this rank's, read back at the end.
        const std::string log = "/tmp/ibcoll-secrets-test-" + std::to_string(getpid());
        const int saved_stderr = dup(STDERR_FILENO);
        RANK_CHECK(std::freopen(log.c_str(), "w", stderr), "stderr to " + log);
        {
          CapiRank r;
          std::vector<int32_t> values(1 << 16, me);
          RANK_CHECK(ibcoll_allreduce(IBCOLL_IN_PLACE, values.data(), values.size(), IBCOLL_INT32,
                                      IBCOLL_SUM, r.world()) == IBCOLL_SUCCESS,
                     ibcoll_last_error());
          RANK_CHECK(values[0] == n * (n - 1) / 2, "the allreduce");
        }
        std::fflush(stderr);
        dup2(saved_stderr, STDERR_FILENO);  // the checks' own messages are seen
        std::ifstream in(log);
        const std::string logged((std::istreambuf_iterator<char>(in)),
                                 std::istreambuf_iterator<char>());
        std::remove(log.c_str());
        RANK_CHECK(logged.find("bootstrap") != std::string::npos,
                   "the trace log says nothing of the bootstrap: " + logged.substr(0, 200));
        RANK_CHECK(logged.find(secret) == std::string::npos, "the log holds the job secret");
        return 0;
      },
      options));
}

}  // namespace
}  // namespace ibcoll::testing
