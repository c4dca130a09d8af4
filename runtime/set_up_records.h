// The records ranks swap in the set-up exchanges (runtime/bootstrap/set_up_exchange.h), written
// and read apart from the steps that make them. What another rank sent is bytes of another
// process (of another ibcoll version, perhaps, or broken): each reader returns what a record says
// or throws Error naming the rank and the record, and never reads past it or throws anything
// else (tests/fuzz/set_up_records_fuzz.cpp feeds them garbage).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "base/status.h"

namespace ibcoll::runtime {

// A step's part: 'o' and its result, or 'e', the Code's number, ':' and where and why it failed.
std::string ok_part(const std::string& result);
std::string failed_part(const Status& status, const std::string& host);
// Every rank's result, by rank; or Error (the failed rank's code, internal for one unknown)
// naming the first rank whose part says it failed, or is no part at all.
std::vector<std::string> results_of_step(const std::string& step, std::vector<std::string> parts);

// The "start" step's: rank 0's fresh job secret (others send none), then the settings every rank
// must share, a NAME=VALUE line each.
struct StartRecord {
  std::string secret;
  std::string settings;
};
std::string start_record(const StartRecord& start);
StartRecord read_start_record(const std::string& record);
// Error(invalid_argument) naming each setting on which a rank's differ from rank 0's, and those
// ranks; `settings` is every rank's, by rank.
void check_shared_settings(const std::vector<std::string>& settings);

// The "placement" step's: the rank's node (one line), its cpus (a list), its package.
struct PlaceRecord {
  std::string node;
  std::string cpus;
  int package = 0;
};
std::string place_record(const PlaceRecord& place);
PlaceRecord read_place_record(const std::string& record, int rank);

// The "shm-unlinked" step's, from a node's first rank: where single copy pays (from, below),
// whether the kernel refused it, and the measurement's summary.
struct SingleCopyRecord {
  size_t from = 0, below = 0;
  bool refused = false;
  std::string summary;
};
std::string single_copy_record(const SingleCopyRecord& verdict);
SingleCopyRecord read_single_copy_record(const std::string& record, int rank);

}  // namespace ibcoll::runtime
