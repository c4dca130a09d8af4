// A set-up step every rank of a job takes together: the step runs here, and its result (this
// rank's part) is swapped with everyone's. A step that fails on any rank (a device that will
// not open, a segment that cannot be made) fails on every rank at that same exchange, with an
// error naming the rank, its host and what went wrong, so no rank goes on into an exchange
// the failed one would never join (under a caller's allgather, that wait has no deadline).
#pragma once

#include <string>
#include <vector>

#include "base/function_ref.h"
#include "runtime/bootstrap/bootstrap.h"

namespace ibcoll::runtime {

// Every rank's part, by rank; or Error (the failed rank's code) on every rank.
std::vector<std::string> exchange_set_up(Bootstrap& bootstrap, const std::string& name,
                                         FunctionRef<std::string()> step);

}  // namespace ibcoll::runtime
