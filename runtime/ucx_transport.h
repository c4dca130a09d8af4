// The UCX transport of a job: open_ucx_channel() makes the channel and swaps every rank's worker
// address through the bootstrap, so endpoints can then be made at first use.
#pragma once

#include <memory>

#include "runtime/job.h"
#include "transport/ucx/ucx_channel.h"

namespace ibcoll::runtime {

// Every rank of the job calls it (the address exchange spans the job).
std::unique_ptr<transport::ucx::UcxChannel> open_ucx_channel(Job& job);

}  // namespace ibcoll::runtime
