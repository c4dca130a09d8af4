// Whether single copy (process_vm_readv) beats the rings' two copies on this node, and for which
// sizes, measured where it matters: between two of the node's ranks, through their channel. The
// one-way time of a message (half a round trip, the best of a few) at each of a few sizes, by
// both paths; single copy is chosen from the smallest size at which it wins by a margin up to
// the next size at which the rings win by that margin. Machines differ here (the kernel's copy
// against cache-to-cache copies, one on each side at once), so no constant in the code decides it.
// About 10 ms of traffic.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "transport/shm/options.h"
#include "transport/shm/shm_channel.h"

namespace ibcoll::transport::shm {

// One-way times of a message of `bytes` by the two paths.
struct CopyTimes {
  size_t bytes;
  double rings_ns, single_ns;
};

// The sizes the calibration measures at, ascending (it may stop before the last).
std::span<const size_t> single_copy_calibration_sizes();

struct SingleCopyCalibration {
  std::vector<CopyTimes> times;  // at ascending sizes
  // The kernel refused one side's reads of the other (EPERM, ENOSYS, a seccomp filter): single
  // copy does not work here, whatever the times.
  bool refused = false;
  double took_ms = 0;
};

// Both ranks of a pair call it, each naming the other as `peer`; the `leader` times, the other
// echoes (its result is empty). The channel's sizes are left as they were. Throws
// Error(timeout) at the deadline, or the channel's error with the peer.
SingleCopyCalibration calibrate_single_copy(ShmChannel& channel, int peer, bool leader,
                                            const Deadline& deadline);

// The sizes from times at ascending sizes: from the smallest size at which single copy takes at
// most 90% of the rings' time, up to (not including) the next size at which the rings take at
// most 90% of single copy's; none if single copy wins at none. A tie changes nothing either way
// (it would flip with the noise), and a win after that loss does not count (the window is one
// run of sizes).
SingleCopySizes single_copy_sizes(std::span<const CopyTimes> ascending);

// The sizes a calibration gives (none where refused) and what it measured, in words, saying
// whether single copy does not work here or loses to the rings.
struct SingleCopyVerdict {
  SingleCopySizes sizes;
  std::string summary;
};
SingleCopyVerdict single_copy_verdict(const SingleCopyCalibration& measured);

}  // namespace ibcoll::transport::shm
