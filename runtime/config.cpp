#include "runtime/config.h"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "base/status.h"
#include "collectives/registry.h"
#include "transport/shm/slot_region.h"
#include "transport/wire.h"

extern char** environ;

namespace ibcoll::runtime {
namespace {

const Variable kVariables[] = {
    {"IBCOLL_LOG", "warn", "log level: error|warn|info|debug|trace"},
    {"IBCOLL_TIMEOUT", "10m",
     "deadline of a call, a wait, connection set-up, and of a silent member an agreement waits on, "
     "which is then fenced out (ms, s or m; 0: none); dead peers are detected whatever it is"},
    {"IBCOLL_HANG_REPORT", "",
     "file for SIGUSR1's report of the calls in flight (%r rank, %p pid); empty: stderr"},
    {"IBCOLL_WAIT", "adaptive", "how waits poll: spin|adaptive (spin, then yield)|event (sleep)"},
    {"IBCOLL_BOOTSTRAP", "auto",
     "how the ranks meet: auto (PMIx under mpirun or srun --mpi=pmix, else one rank alone)|pmix|"
     "tcp://host:port (rank 0 serves a TCP store there)"},
    {"IBCOLL_RANK", "", "with the TCP store: this process's rank (else from OMPI_/PMI_/SLURM_)"},
    {"IBCOLL_SIZE", "", "with the TCP store: number of ranks (else from OMPI_/PMI_/SLURM_)"},
    {"IBCOLL_JOB_SECRET", "",
     "secret every process presents to the TCP store: 16 characters or more, unless the store "
     "is on loopback"},
    {"IBCOLL_NODE", "",
     "name of this node (ranks with one name share memory); empty: host name and boot id"},
    {"IBCOLL_TOPOLOGY", "",
     "hwloc XML file or synthetic description (pack:2 core:8 pu:2) instead of this machine's"},
    {"IBCOLL_TRANSPORT", "auto",
     "auto (shm inside a node; verbs between, or UCX where a node has no verbs device)|shm|"
     "verbs|ucx (verbs and ucx: also inside a node)"},
    {"IBCOLL_ALLREDUCE_ALGO", "auto", "force an allreduce algorithm (ibcoll_info lists them)"},
    {"IBCOLL_BCAST_ALGO", "auto", "force a bcast algorithm (ibcoll_info lists them)"},
    {"IBCOLL_CHECK_CALLS", "1", "check that all ranks make the same collective call (0|1)"},
    {"IBCOLL_FULL_CHECK_EVERY", "16",
     "checked by messages (across nodes), small bcasts send nothing back to the root but every "
     "Nth, which every member checks in full with a digest of those before it; 1: every one"},
    {"IBCOLL_PROBE_AFTER", "200ms",
     "a rank that waits this long on one partner in a checked call asks it whether its call "
     "differs (ms, s or m)"},
    {"IBCOLL_SHM_SLOTS", "1",
     "run node-local collectives in the shared slots and staging halves (0|1)"},
    {"IBCOLL_SHM_SINGLE_COPY", "auto",
     "node-local messages of these sizes are read from the sender (CMA): FROM (and up) or "
     "FROM-BELOW; 0: rings only; auto: measured between two ranks of the node at start-up"},
    {"IBCOLL_ALLREDUCE_SLOTS_MAX", "auto",
     "largest node-local allreduce (bytes per rank, at most 32K) that every rank folds whole "
     "from the slots; larger ones run staged; auto: measured on the node's ranks at start-up"},
    {"IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", "auto",
     "node-local allreduces from this size read the members' inputs from their processes (CMA) "
     "where the node's single copy works; 0: never; auto: measured on the node's ranks at "
     "start-up"},
    {"IBCOLL_CALIBRATION_PRETEND", "",
     "for tests: the start-up calibrations decide from times that give these outcomes "
     "(single_copy=wins|window|loses|refused, slots=early|late, "
     "allreduce_single_copy=early|late|never; comma-separated); empty: as measured"},
    {"IBCOLL_COMM_IDS", "65535",
     "the largest communicator id (a live communicator holds one; freed, it is free again): less "
     "only for tests that run out of ids"},
    {"IBCOLL_FAULT", "",
     "for tests: this process fails at the named point (node-calibration: its node's start-up "
     "calibration; qp-error:N: the verbs QP of its Nth work request goes into error once it is "
     "posted; agreement-exit:N: it is killed right after sending its Nth agreement message); "
     "empty: none"},
    {"IBCOLL_DEVICE", "",
     "verbs device as name[:port]; empty: the active one nearest this rank's cpus (ranks of a "
     "node take turns over equally near ones)"},
    {"IBCOLL_GID_INDEX", "auto", "RoCE GID index; auto prefers an IPv4-mapped RoCE v2 GID"},
    {"IBCOLL_XRC", "auto", "XRC shared receive queues: auto|on|off"},
    {"IBCOLL_XRC_DIR", "",
     "private directory (0700) of the per-job XRC domain files; empty: /tmp/ibcoll-UID"},
    {"IBCOLL_CM", "ud", "connection set-up: ud (handshake over a UD QP)|rdmacm"},
    {"IBCOLL_CONNECT", "planned",
     "when verbs connections are made: planned (at start-up, to the peers the connection plan "
     "gives the world's calls; any other on first use)|on_demand (each on first use)"},
    {"IBCOLL_EAGER_LIMIT", "64K",
     "largest message sent by copy; larger ones by RDMA write (UCX: its rendezvous)"},
    {"IBCOLL_EAGER_BUFFER", "8K",
     "bytes of each registered send and receive buffer; longer copies go in parts"},
    {"IBCOLL_SRQ_DEPTH", "512", "receive buffers in the shared receive queue"},
    {"IBCOLL_CREDITS", "32",
     "most messages one peer may have in our receive queue (3/4 of it are shared among the "
     "peers connected)"},
    {"IBCOLL_MR_CACHE", "auto",
     "keep user buffers registered between transfers: auto (where libucm reports unmaps), 0 or 1"},
    {"IBCOLL_MR_CACHE_SIZE", "1G", "most bytes the registration cache keeps registered"},
    {"IBCOLL_HANDSHAKE_RETRY", "200ms", "resend an unanswered connection handshake after this"},
    {"IBCOLL_KEEPALIVE", "1s",
     "probe a silent peer that an operation waits on after this (UCX: its keepalive interval, "
     "unless UCX_KEEPALIVE_INTERVAL is set)"},
};

std::string value_or_default(const std::function<const char*(const char*)>& lookup,
                             const Variable& v) {
  const char* value = lookup(v.name);
  return value ? value : v.default_value;
}

void warn_about_unknown_variables() {
  for (char** e = environ; e && *e; ++e) {
    if (std::strncmp(*e, "IBCOLL_", 7) != 0) continue;
    std::string name(*e, std::strcspn(*e, "="));
    bool known = false;
    for (const Variable& v : kVariables)
      known |= name == v.name;
    if (!known) IBCOLL_LOG(warn, "unknown variable " << name << " (see ibcoll_info)");
  }
}

// An IBCOLL_*_ALGO value: "auto" or the name of one of `collective`'s algorithms.
std::string parse_algorithm(const char* name, collectives::Collective collective,
                            const std::string& text) {
  if (text.empty() || text == "auto") return text;
  try {
    collectives::find_algorithm(collective, text);
  } catch (const Error& e) {
    throw Error(Code::invalid_argument, std::string(name) + ": " + e.status().message());
  }
  return text;
}

}  // namespace

std::span<const Variable> config_variables() {
  return kVariables;
}

long parse_integer(const char* name, const std::string& text, long min, long max) {
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min || value > max) {
    throw Error(Code::invalid_argument, std::string(name) + ": '" + text +
                                            "' is not an integer in [" + std::to_string(min) +
                                            ", " + std::to_string(max) + "]");
  }
  return value;
}

std::chrono::milliseconds parse_duration(const char* name, const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  const std::string unit = text.substr(digits);
  long scale = 0;
  if (unit == "ms") scale = 1;
  if (unit == "s" || unit.empty()) scale = 1000;
  if (unit == "m") scale = 60000;
  if (digits == 0 || scale == 0) {
    throw Error(Code::invalid_argument,
                std::string(name) + ": '" + text + "' is not a duration (e.g. 500ms, 60s, 2m)");
  }
  long value = parse_integer(name, text.substr(0, digits), 1, 1000L * 3600 * 24);
  return std::chrono::milliseconds(value * scale);
}

size_t parse_size(const char* name, const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  const std::string unit = text.substr(digits);
  size_t scale = 0;
  if (unit.empty()) scale = 1;
  if (unit == "k" || unit == "K") scale = size_t{1} << 10;
  if (unit == "m" || unit == "M") scale = size_t{1} << 20;
  if (unit == "g" || unit == "G") scale = size_t{1} << 30;
  if (digits == 0 || scale == 0) {
    throw Error(Code::invalid_argument,
                std::string(name) + ": '" + text + "' is not a size (e.g. 8192, 64k, 1M, 1G)");
  }
  return static_cast<size_t>(parse_integer(name, text.substr(0, digits), 0, 1L << 40)) * scale;
}

transport::shm::SingleCopySizes parse_single_copy(const std::string& text) {
  constexpr const char* kName = "IBCOLL_SHM_SINGLE_COPY";
  const size_t dash = text.find('-');
  transport::shm::SingleCopySizes sizes{parse_size(kName, text.substr(0, dash))};
  if (dash != std::string::npos) sizes.below = parse_size(kName, text.substr(dash + 1));
  if (sizes.from != 0 && sizes.below <= sizes.from) {
    throw Error(Code::invalid_argument, std::string(kName) + ": '" + text +
                                            "' is an empty range (FROM-BELOW, FROM < BELOW)");
  }
  return sizes;
}

std::chrono::milliseconds parse_timeout(const std::string& text) {
  if (text == "0") return kNoTimeout;
  return parse_duration("IBCOLL_TIMEOUT", text);
}

bool parse_bool(const char* name, const std::string& text) {
  if (text == "1" || text == "on" || text == "yes" || text == "true") return true;
  if (text == "0" || text == "off" || text == "no" || text == "false") return false;
  throw Error(Code::invalid_argument, std::string(name) + ": '" + text + "' is not 0 or 1");
}

TransportMode parse_transport_mode(const std::string& text) {
  if (text == "auto") return TransportMode::automatic;
  if (text == "shm") return TransportMode::shm;
  if (text == "verbs") return TransportMode::verbs;
  if (text == "ucx") return TransportMode::ucx;
  throw Error(Code::invalid_argument,
              "IBCOLL_TRANSPORT: '" + text + "' is not one of auto|shm|verbs|ucx");
}

const char* transport_mode_name(TransportMode mode) {
  switch (mode) {
    case TransportMode::automatic:
      return "auto";
    case TransportMode::shm:
      return "shm";
    case TransportMode::verbs:
      return "verbs";
    case TransportMode::ucx:
      return "ucx";
  }
  return "unknown";
}

std::string Config::shared_settings() const {
  auto algorithm = [](const std::string& name) { return name.empty() ? "auto" : name; };
  std::string lines =
      std::string("IBCOLL_TRANSPORT=") + transport_mode_name(transport) + "\n" +
      "IBCOLL_ALLREDUCE_ALGO=" + algorithm(policy.allreduce_algorithm) + "\n" +
      "IBCOLL_BCAST_ALGO=" + algorithm(policy.bcast_algorithm) + "\n" +
      "IBCOLL_CHECK_CALLS=" + (policy.check_calls ? "1" : "0") + "\n" +
      "IBCOLL_FULL_CHECK_EVERY=" + std::to_string(policy.full_check_every) + "\n" +
      "IBCOLL_SHM_SLOTS=" + (shm_slots ? "1" : "0") + "\n" +
      "IBCOLL_SHM_SINGLE_COPY=" + (calibrate_single_copy ? "auto" : shm.single_copy.text()) + "\n" +
      "IBCOLL_ALLREDUCE_SLOTS_MAX=" +
      (calibrate_slots_allreduce ? "auto" : std::to_string(policy.tuning.slots_allreduce_max)) +
      "\n" + "IBCOLL_ALLREDUCE_SINGLE_COPY_FROM=" +
      (calibrate_single_copy_allreduce ? "auto"
                                       : std::to_string(policy.tuning.single_copy_allreduce_from)) +
      "\n" + "IBCOLL_CALIBRATION_PRETEND=" + pretend.text + "\n" +
      "IBCOLL_COMM_IDS=" + std::to_string(largest_communicator_id) + "\n";
#ifdef IBCOLL_HAVE_VERBS
  lines += std::string("IBCOLL_CM=") +
           (verbs.connect == transport::verbs::ConnectMode::ud ? "ud" : "rdmacm") + "\n" +
           "IBCOLL_XRC=" + transport::verbs::xrc_mode_name(verbs.xrc) + "\n" +
           "IBCOLL_EAGER_BUFFER=" + std::to_string(verbs.eager_buffer) + "\n";
#endif
  return lines;
}

Config Config::from_environment() {
  warn_about_unknown_variables();
  return from_environment([](const char* name) { return std::getenv(name); });
}

Config Config::from_environment(const std::function<const char*(const char*)>& lookup) {
  auto get = [&](const char* name) {
    for (const Variable& v : kVariables) {
      if (std::strcmp(v.name, name) == 0) return value_or_default(lookup, v);
    }
    throw Error(Code::internal, std::string("undeclared variable ") + name);
  };
  Config c;
  c.log_level = log::parse_level(get("IBCOLL_LOG"));
  c.timeout = parse_timeout(get("IBCOLL_TIMEOUT"));
  c.shm.read_wait = c.timeout;
  c.hang_report = get("IBCOLL_HANG_REPORT");
  c.wait = transport::parse_wait_policy(get("IBCOLL_WAIT"));
  c.node = get("IBCOLL_NODE");
  if (c.node.find_first_of("\n") != std::string::npos) {
    throw Error(Code::invalid_argument, "IBCOLL_NODE: a node name is one line");
  }
  c.topology = get("IBCOLL_TOPOLOGY");
  c.transport = parse_transport_mode(get("IBCOLL_TRANSPORT"));
  c.policy.allreduce_algorithm = parse_algorithm(
      "IBCOLL_ALLREDUCE_ALGO", collectives::Collective::allreduce, get("IBCOLL_ALLREDUCE_ALGO"));
  c.policy.bcast_algorithm = parse_algorithm("IBCOLL_BCAST_ALGO", collectives::Collective::bcast,
                                             get("IBCOLL_BCAST_ALGO"));
  c.policy.check_calls = parse_bool("IBCOLL_CHECK_CALLS", get("IBCOLL_CHECK_CALLS"));
  c.policy.full_check_every = static_cast<int>(
      parse_integer("IBCOLL_FULL_CHECK_EVERY", get("IBCOLL_FULL_CHECK_EVERY"), 1, 1024));
  c.policy.probe_after = parse_duration("IBCOLL_PROBE_AFTER", get("IBCOLL_PROBE_AFTER"));
  if (c.policy.probe_after.count() <= 0) {
    throw Error(Code::invalid_argument, "IBCOLL_PROBE_AFTER: must be longer than 0");
  }
  c.shm_slots = parse_bool("IBCOLL_SHM_SLOTS", get("IBCOLL_SHM_SLOTS"));
  const std::string single_copy = get("IBCOLL_SHM_SINGLE_COPY");
  c.calibrate_single_copy = single_copy == "auto";
  if (!c.calibrate_single_copy) c.shm.single_copy = parse_single_copy(single_copy);
  const std::string slots_max = get("IBCOLL_ALLREDUCE_SLOTS_MAX");
  c.calibrate_slots_allreduce = slots_max == "auto";
  if (!c.calibrate_slots_allreduce) {
    c.policy.tuning.slots_allreduce_max = parse_size("IBCOLL_ALLREDUCE_SLOTS_MAX", slots_max);
    if (c.policy.tuning.slots_allreduce_max > transport::shm::SlotRegion::kDataBytes) {
      throw Error(Code::invalid_argument,
                  "IBCOLL_ALLREDUCE_SLOTS_MAX: at most 32K (a slot's buffer), or auto");
    }
  }
  const std::string single_copy_from = get("IBCOLL_ALLREDUCE_SINGLE_COPY_FROM");
  c.calibrate_single_copy_allreduce = single_copy_from == "auto";
  if (!c.calibrate_single_copy_allreduce) {
    c.policy.tuning.single_copy_allreduce_from =
        parse_size("IBCOLL_ALLREDUCE_SINGLE_COPY_FROM", single_copy_from);
  }
  c.pretend = parse_calibration_pretend(get("IBCOLL_CALIBRATION_PRETEND"));
  const std::string fault = get("IBCOLL_FAULT");
  if (fault == "node-calibration") {
    c.fault = Fault::node_calibration;
  } else if (fault.starts_with("qp-error:")) {
    c.fault = Fault::qp_error;
    c.fault_after =
        static_cast<uint64_t>(parse_integer("IBCOLL_FAULT", fault.substr(9), 1, 1L << 62));
  } else if (fault.starts_with("agreement-exit:")) {
    c.fault = Fault::agreement_exit;
    c.fault_after =
        static_cast<uint64_t>(parse_integer("IBCOLL_FAULT", fault.substr(15), 1, 1L << 62));
  } else if (!fault.empty()) {
    throw Error(Code::invalid_argument, "IBCOLL_FAULT: '" + fault +
                                            "' is no fault point (node-calibration, qp-error:N, "
                                            "agreement-exit:N, or empty)");
  }
  c.largest_communicator_id = static_cast<uint32_t>(
      parse_integer("IBCOLL_COMM_IDS", get("IBCOLL_COMM_IDS"), 3, CommunicatorIds::kLargest));
  c.ucx.eager_limit = parse_size("IBCOLL_EAGER_LIMIT", get("IBCOLL_EAGER_LIMIT"));
  if (c.ucx.eager_limit > transport::wire::kMaxEagerBytes) {
    throw Error(Code::invalid_argument, "IBCOLL_EAGER_LIMIT: at most 1M");
  }
  c.ucx.liveness = c.timeout;
  c.ucx.keepalive = parse_duration("IBCOLL_KEEPALIVE", get("IBCOLL_KEEPALIVE"));
  c.ucx.wakeup = c.wait == transport::WaitPolicy::event;
#ifdef IBCOLL_HAVE_VERBS
  auto& v = c.verbs;
  v.device = get("IBCOLL_DEVICE");
  const std::string gid = get("IBCOLL_GID_INDEX");
  v.gid_index =
      gid == "auto" ? -1 : static_cast<int>(parse_integer("IBCOLL_GID_INDEX", gid, 0, 65535));
  v.xrc = transport::verbs::parse_xrc_mode(get("IBCOLL_XRC"));
  c.xrc_dir = get("IBCOLL_XRC_DIR");
  if (c.xrc_dir.empty()) c.xrc_dir = "/tmp/ibcoll-" + std::to_string(geteuid());
  if (c.xrc_dir.front() != '/') {
    throw Error(Code::invalid_argument, "IBCOLL_XRC_DIR: '" + c.xrc_dir + "' is not absolute");
  }
  v.connect = transport::verbs::parse_connect_mode(get("IBCOLL_CM"));
  const std::string when = get("IBCOLL_CONNECT");
  if (when != "planned" && when != "on_demand") {
    throw Error(Code::invalid_argument,
                "IBCOLL_CONNECT: '" + when + "' is not planned or on_demand");
  }
  c.connect_planned = when == "planned";
  v.eager_limit = c.ucx.eager_limit;
  v.eager_buffer = parse_size("IBCOLL_EAGER_BUFFER", get("IBCOLL_EAGER_BUFFER"));
  if (v.eager_buffer < 64 || v.eager_buffer > (size_t{1} << 20)) {
    throw Error(Code::invalid_argument, "IBCOLL_EAGER_BUFFER: from 64 to 1M");
  }
  v.srq_depth =
      static_cast<uint32_t>(parse_integer("IBCOLL_SRQ_DEPTH", get("IBCOLL_SRQ_DEPTH"), 2, 1 << 20));
  v.credits =
      static_cast<uint32_t>(parse_integer("IBCOLL_CREDITS", get("IBCOLL_CREDITS"), 1, 1 << 16));
  const std::string cache = get("IBCOLL_MR_CACHE");
  v.mr_cache = cache == "auto"                        ? transport::verbs::CacheMode::automatic
               : parse_bool("IBCOLL_MR_CACHE", cache) ? transport::verbs::CacheMode::on
                                                      : transport::verbs::CacheMode::off;
  v.mr_cache_bytes = parse_size("IBCOLL_MR_CACHE_SIZE", get("IBCOLL_MR_CACHE_SIZE"));
  v.timeout = c.timeout;
  v.handshake_retry = parse_duration("IBCOLL_HANDSHAKE_RETRY", get("IBCOLL_HANDSHAKE_RETRY"));
  v.keepalive = c.ucx.keepalive;
  v.error_qp_after = c.fault == Fault::qp_error ? c.fault_after : 0;
  v.event_channel = c.wait == transport::WaitPolicy::event;
#endif
  return c;
}

}  // namespace ibcoll::runtime
