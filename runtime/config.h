// Config: every IBCOLL_* knob, declared once in one table (name, default, description) that
// ibcoll_info prints. from_environment() parses and validates them all: a bad value is an
// Error(invalid_argument) naming the variable; an unknown IBCOLL_* variable is warned about.
#pragma once

#include <chrono>
#include <functional>
#include <span>
#include <string>

#include "base/log.h"
#include "collectives/communicator.h"
#include "runtime/calibration_pretend.h"
#include "runtime/communicator_ids.h"
#include "transport/progress.h"
#include "transport/shm/options.h"
#ifdef IBCOLL_HAVE_VERBS
#include "transport/ucx/options.h"
#include "transport/verbs/options.h"
#endif

namespace ibcoll::runtime {

struct Variable {
  const char* name;
  const char* default_value;
  const char* description;
};

std::span<const Variable> config_variables();

// Which transport carries messages between ranks.
enum class TransportMode {
  automatic,  // shared memory inside a node, verbs between nodes
  shm,        // shared memory only (every rank on one node)
  verbs,      // verbs only, also inside a node
  ucx,        // UCX only, also inside a node
};
TransportMode parse_transport_mode(const std::string& text);
const char* transport_mode_name(TransportMode mode);

struct Config {
  log::Level log_level = log::Level::warn;
  std::chrono::milliseconds timeout = std::chrono::minutes(10);
  transport::WaitPolicy wait = transport::WaitPolicy::adaptive;
  std::string node;         // empty: the host name and boot id
  std::string topology;     // hwloc XML file or synthetic description; empty: this machine
  std::string hang_report;  // where SIGUSR1's report goes (%r rank, %p pid); empty: stderr
  TransportMode transport = TransportMode::automatic;
  collectives::Policy policy;  // forced algorithms, call checks
  bool shm_slots = true;       // node-local communicators get the slot region
  transport::shm::ShmOptions shm;
  bool calibrate_single_copy = true;  // shm.single_copy measured at start-up
  // policy.tuning's thresholds measured at start-up (runtime/node_calibration.h)
  bool calibrate_slots_allreduce = true;
  bool calibrate_single_copy_allreduce = true;
  CalibrationPretend pretend;  // for tests: the outcomes the calibrations decide from
  // For tests: where this process fails on purpose (per process: not a shared setting).
  enum class Fault { none, node_calibration, qp_error, agreement_exit } fault = Fault::none;
  // qp_error: after this many work requests posted over verbs; agreement_exit: after this many
  // agreement messages sent
  uint64_t fault_after = 0;
  uint32_t largest_communicator_id = CommunicatorIds::kLargest;
  transport::ucx::Options ucx;
#ifdef IBCOLL_HAVE_VERBS
  transport::verbs::Options verbs;
  std::string xrc_dir;  // where the per-job XRC domain files go
  // Connect at start-up to the remote peers the connection plan gives this rank (IBCOLL_CONNECT).
  bool connect_planned = true;
#endif

  // `lookup` returns the value of a variable or null when unset (getenv by default).
  static Config from_environment(const std::function<const char*(const char*)>& lookup);
  static Config from_environment();

  // The settings every rank of a job must have alike, else their calls go different ways and
  // wait on each other forever (the transport and connection method, the eager part size,
  // forced algorithms, call checks, slots): "VARIABLE=value" lines, values in one form.
  std::string shared_settings() const;
};

// IBCOLL_TIMEOUT=0: no deadline (a century, so that deadlines computed from it never overflow).
inline constexpr std::chrono::milliseconds kNoTimeout = std::chrono::hours(24 * 365 * 100);
std::chrono::milliseconds parse_timeout(const std::string& text);
// IBCOLL_SHM_SINGLE_COPY other than auto: "0", "FROM" (and up) or "FROM-BELOW".
transport::shm::SingleCopySizes parse_single_copy(const std::string& text);

// Parsers shared by the table; each throws Error(invalid_argument) naming `name`.
std::chrono::milliseconds parse_duration(const char* name, const std::string& text);
size_t parse_size(const char* name, const std::string& text);
long parse_integer(const char* name, const std::string& text, long min, long max);
bool parse_bool(const char* name, const std::string& text);

}  // namespace ibcoll::runtime
