#include "runtime/bootstrap/bootstrap_choice.h"

#include "base/status.h"
#include "runtime/bootstrap/tcp_store.h"
#ifdef IBCOLL_HAVE_PMIX
#include "runtime/bootstrap/pmix_bootstrap.h"
#endif

namespace ibcoll::runtime {
namespace {

// A job of one rank: every allgather is this rank's own part.
class SingletonBootstrap final : public Bootstrap {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string describe() const override { return "none (a job of one rank)"; }
  std::vector<std::string> allgather(const std::string&, const std::string& mine) override {
    return {mine};
  }
};

// A PMIx launcher names the job in every process it starts.
bool started_by_pmix(const std::function<const char*(const char*)>& lookup) {
  return lookup("PMIX_NAMESPACE") && lookup("PMIX_RANK");
}

}  // namespace

const char* bootstrap_kind_name(BootstrapChoice::Kind kind) {
  switch (kind) {
    case BootstrapChoice::Kind::pmix:
      return "pmix";
    case BootstrapChoice::Kind::tcp:
      return "tcp";
    case BootstrapChoice::Kind::singleton:
      break;
  }
  return "singleton";
}

BootstrapChoice choose_bootstrap(const std::string& setting,
                                 const std::function<const char*(const char*)>& lookup) {
  using Kind = BootstrapChoice::Kind;
  if (setting == "pmix") return {Kind::pmix, "", "IBCOLL_BOOTSTRAP=pmix", {}};
  if (!setting.empty() && setting != "auto") {
    const std::string address = setting.starts_with("tcp://") ? setting.substr(6) : setting;
    parse_host_port(address);  // throws naming IBCOLL_BOOTSTRAP
    return {Kind::tcp, address, "IBCOLL_BOOTSTRAP=" + setting,
            launch_info_from_environment(lookup)};
  }
  if (started_by_pmix(lookup)) {
    return {
        Kind::pmix, "", "auto: a PMIx launcher started this process (PMIX_NAMESPACE is set)", {}};
  }
  if (!started_by_launcher(lookup)) {
    return {Kind::singleton, "", "auto: no launcher started this process", {}};
  }
  const LaunchInfo launch = launch_info_from_environment(lookup);
  if (launch.size == 1) return {Kind::singleton, "", "auto: the launcher started one rank", launch};
  throw Error(Code::invalid_argument,
              "IBCOLL_BOOTSTRAP: " + std::to_string(launch.size) +
                  " ranks and no PMIx server: start them with mpirun or srun --mpi=pmix, or set "
                  "IBCOLL_BOOTSTRAP=tcp://host:port (rank 0 serves a TCP store there) and "
                  "IBCOLL_JOB_SECRET");
}

std::unique_ptr<Bootstrap> open_bootstrap(const BootstrapChoice& choice,
                                          std::chrono::milliseconds timeout) {
  switch (choice.kind) {
    case BootstrapChoice::Kind::pmix:
#ifdef IBCOLL_HAVE_PMIX
      return std::make_unique<PmixBootstrap>(timeout);
#else
      throw Error(Code::not_supported,
                  "IBCOLL_BOOTSTRAP: this build has no PMIx (" + choice.reason + ")");
#endif
    case BootstrapChoice::Kind::tcp:
      return std::make_unique<TcpStore>(choice.address, choice.launch.rank, choice.launch.size,
                                        choice.launch.secret, timeout);
    case BootstrapChoice::Kind::singleton:
      break;
  }
  return std::make_unique<SingletonBootstrap>();
}

}  // namespace ibcoll::runtime
