// How many heap allocations this process has made and freed: a test binary that links
// heap_count.cpp replaces the global operator new and delete, plain and aligned, with ones that
// count their calls (not under AddressSanitizer, whose own must stay: there the count is
// unknown).
#pragma once

#include <cstdint>
#include <optional>

namespace ibcoll::testing {

// Calls of the global operator new so far in this process, or nullopt where they are not counted.
std::optional<uint64_t> heap_allocations();
// Calls of the global operator delete with a block (not null) so far, or nullopt likewise.
std::optional<uint64_t> heap_frees();

}  // namespace ibcoll::testing
