// libFuzzer target: the records of the set-up exchanges (runtime/set_up_records.h), as other
// ranks' bytes. The first byte picks the reader; the rest is one record, or (for the step parts
// and the shared settings) several, split at NUL bytes. A reader returns or throws Error, and
// nothing else; what it read, written again, reads back the same. A cpu list (hwloc's parser)
// must read or throw Error too.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "runtime/set_up_records.h"
#include "topo/cpu_set.h"

using namespace ibcoll;
using namespace ibcoll::runtime;

namespace {

void check(bool holds) {
  if (!holds) std::abort();
}

std::vector<std::string> split_at_nul(const std::string& input) {
  std::vector<std::string> parts;
  for (size_t at = 0;;) {
    const size_t end = input.find('\0', at);
    parts.push_back(input.substr(at, end == std::string::npos ? end : end - at));
    if (end == std::string::npos) return parts;
    at = end + 1;
  }
}

void read(uint8_t which, const std::string& input) {
  switch (which % 5) {
    case 0: {
      const std::vector<std::string> results = results_of_step("fuzz", split_at_nul(input));
      for (const std::string& result : results)
        check(input.find(result) != std::string::npos);
      break;
    }
    case 1: {
      const StartRecord start = read_start_record(input);
      const StartRecord again = read_start_record(start_record(start));
      check(again.secret == start.secret && again.settings == start.settings);
      check_shared_settings(split_at_nul(input));
      break;
    }
    case 2: {
      const PlaceRecord place = read_place_record(input, 3);
      const PlaceRecord again = read_place_record(place_record(place), 3);
      check(again.node == place.node && again.cpus == place.cpus && again.package == place.package);
      topo::CpuSet::from_list(place.cpus, "fuzz");
      break;
    }
    case 3: {
      const SingleCopyRecord verdict = read_single_copy_record(input, 3);
      const SingleCopyRecord again = read_single_copy_record(single_copy_record(verdict), 3);
      check(again.from == verdict.from && again.below == verdict.below &&
            again.refused == verdict.refused && again.summary == verdict.summary);
      break;
    }
    case 4:
      topo::CpuSet::from_list(input, "fuzz");
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  try {
    read(data[0], std::string(reinterpret_cast<const char*>(data) + 1, size - 1));
  } catch (const Error&) {
  }
  return 0;
}
