#include "collectives/select.h"

#include <limits>

namespace ibcoll::collectives {
namespace {

// The first row of a collective whose limits hold wins; the last row of each has no limits.
struct Rule {
  Collective collective;
  size_t max_bytes;  // per rank
  int min_ranks;
  const char* algorithm;
};

constexpr size_t kAny = std::numeric_limits<size_t>::max();

const Rule kRules[] = {
    {Collective::allreduce, kAny, 1, "recursive_doubling"},
    {Collective::bcast, kAny, 1, "binomial"},
};

}  // namespace

const Algorithm& select_algorithm(Collective collective, size_t bytes, int ranks,
                                  std::string_view forced) {
  if (!forced.empty() && forced != "auto") return find_algorithm(collective, forced);
  for (const Rule& rule : kRules) {
    if (rule.collective == collective && bytes <= rule.max_bytes && ranks >= rule.min_ranks) {
      return find_algorithm(collective, rule.algorithm);
    }
  }
  throw Error(Code::internal,
              std::string("no default algorithm for ") + collective_name(collective));
}

}  // namespace ibcoll::collectives
