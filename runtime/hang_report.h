// Hang reports on demand: SIGUSR1 (mpirun forwards it to every rank) asks each process to write
// what its collective calls in flight wait for, without disturbing them: the signal only sets a
// flag, and the next round of ibcoll's progress (every wait polls, so a stuck call answers at
// once) writes the report to IBCOLL_HANG_REPORT or, unset, to stderr. The handler is installed
// only where the program has none of its own for SIGUSR1.
#pragma once

#include <string>
#include <vector>

namespace ibcoll::runtime {

void install_hang_report_signal();
// Whether a report was asked for since the last call (cheap: one relaxed load on the way).
bool hang_report_requested();
// Writes the report of rank `rank` (its calls, each in words) to `destination`: a path in which
// %r stands for the rank and %p for the process id (appended to), or stderr if empty.
void write_hang_report(const std::string& destination, int rank,
                       const std::vector<std::string>& calls);

}  // namespace ibcoll::runtime
