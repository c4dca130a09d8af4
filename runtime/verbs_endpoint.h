// The verbs transport of a job. open_verbs_channel() builds the channel and exchanges every
// rank's endpoint address through the bootstrap store, so connections can then be made on
// demand. VerbsEndpoint is a job that talks over verbs only.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/job.h"
#include "runtime/placement.h"
#include "transport/verbs/verbs_channel.h"

namespace ibcoll::runtime {

// Every rank of the job calls it (the address exchange spans the job). With IBCOLL_DEVICE
// unset, the device is the active one nearest the rank's cpus (topo::choose_device).
std::unique_ptr<transport::verbs::VerbsChannel> open_verbs_channel(Job& job,
                                                                   const Placement& placement);

// Under IBCOLL_XRC=auto, the ranks whose XRC set-up failed where others' worked (a node without
// it, a file that would not open), for which the whole job falls back to RC: RC QPs and XRC
// INIs cannot be connected to each other. Empty where all agree.
std::vector<int> ranks_to_fall_back_for(std::span<const transport::verbs::EndpointAddress> all);

// The XRC domain file of the job `job` (any string that names it alike on every rank, such as
// its secret: only a digest of it appears) in IBCOLL_XRC_DIR.
std::string xrc_domain_file(const Config& config, const std::string& job);

class VerbsEndpoint : public Job {
 public:
  VerbsEndpoint();
  transport::verbs::VerbsChannel& channel() { return *channel_; }

 private:
  std::unique_ptr<transport::verbs::VerbsChannel> channel_;
};

}  // namespace ibcoll::runtime
