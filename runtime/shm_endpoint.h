// Shared memory between the ranks of one node. open_shm_channel() builds the channel: the
// node's first rank creates the segment (0600), the others open it, and once every rank has
// attached the name is unlinked. ShmEndpoint is a job whose ranks all share one node.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runtime/job.h"
#include "transport/shm/shm_channel.h"

namespace ibcoll::runtime {

struct OpenedShm {
  std::unique_ptr<transport::shm::ShmChannel> channel;
  // Why the channel reads no message from its sender, in words ("single copy loses to the rings
  // here", "... does not work here", "IBCOLL_SHM_SINGLE_COPY=0"); empty where it reads some.
  std::string single_copy_off;
};

// `node_ranks`: the job ranks on this node, ascending, this one among them. Every rank of the
// job calls it (its barriers span the job).
OpenedShm open_shm_channel(Job& job, const std::vector<int>& node_ranks, const std::string& node);

// The segment's name for a job (by its secret) and node.
std::string segment_name_for(const std::string& secret, const std::string& node);

class ShmEndpoint : public Job {
 public:
  ShmEndpoint();
  transport::shm::ShmChannel& channel() { return *channel_; }
  std::string segment_name() const { return segment_name_for(launch().secret, segment_node_); }

 private:
  static constexpr const char* segment_node_ = "";  // every rank on one node
  std::unique_ptr<transport::shm::ShmChannel> channel_;
};

}  // namespace ibcoll::runtime
