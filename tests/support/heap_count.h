// How many heap allocations this process has made: a test binary that links heap_count.cpp
// replaces the global operator new, plain and aligned, with one that counts its calls (not under
// AddressSanitizer, whose own operator new must stay: there the count is unknown).
#pragma once

#include <cstdint>
#include <optional>

namespace ibcoll::testing {

// Calls of the global operator new so far in this process, or nullopt where they are not counted.
std::optional<uint64_t> heap_allocations();

}  // namespace ibcoll::testing
