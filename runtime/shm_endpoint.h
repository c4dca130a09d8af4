// ShmEndpoint: one rank's shared-memory transport for ranks on one node: the job plus a
// ShmChannel on the node's segment. Rank 0 creates the segment (0600), the others open it,
// and once every rank has attached rank 0 unlinks its name.
#pragma once

#include <memory>
#include <string>

#include "runtime/job.h"
#include "transport/shm/shm_channel.h"

namespace ibcoll::runtime {

class ShmEndpoint : public Job {
 public:
  ShmEndpoint();
  transport::shm::ShmChannel& channel() { return *channel_; }
  const std::string& segment_name() const { return segment_name_; }

 private:
  std::string segment_name_;
  std::unique_ptr<transport::shm::ShmChannel> channel_;
};

}  // namespace ibcoll::runtime
