#include "runtime/shm_endpoint.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>

#include "runtime/bootstrap/set_up_exchange.h"

namespace ibcoll::runtime {

// The name says which job and node it belongs to without revealing the job's secret.
std::string segment_name_for(const std::string& secret, const std::string& node) {
  char name[40];
  std::snprintf(name, sizeof(name), "/ibcoll-%016zx",
                std::hash<std::string>()(secret + '\n' + node));
  return name;
}

std::unique_ptr<transport::shm::ShmChannel> open_shm_channel(Job& job,
                                                             const std::vector<int>& node_ranks,
                                                             const std::string& node) {
  using transport::shm::SharedSegment;
  using transport::shm::ShmChannel;
  const int local_size = static_cast<int>(node_ranks.size());
  const int local_rank = static_cast<int>(
      std::find(node_ranks.begin(), node_ranks.end(), job.rank()) - node_ranks.begin());
  const bool creator = local_rank == 0;
  const std::string name = segment_name_for(job.launch().secret, node);
  const size_t bytes = ShmChannel::segment_bytes(local_size);
  std::unique_ptr<SharedSegment> segment;
  Bootstrap& bootstrap = job.bootstrap();
  exchange_set_up(bootstrap, "shm-created", [&] {
    if (creator) segment = std::make_unique<SharedSegment>(SharedSegment::create(name, bytes));
    return std::string();
  });
  try {
    exchange_set_up(bootstrap, "shm-attached", [&] {  // every rank has it mapped: the name can go
      if (!creator) {
        segment =
            std::make_unique<SharedSegment>(SharedSegment::open(name, bytes, job.config().timeout));
      }
      return std::string();
    });
  } catch (const Error&) {
    if (creator) segment->unlink();  // a rank that could not attach leaves no name behind
    throw;
  }
  if (creator) segment->unlink();
  bootstrap.barrier("shm-unlinked");  // set-up leaves nothing behind on any rank's return
  auto channel =
      std::make_unique<ShmChannel>(local_rank, local_size, std::move(*segment), job.config().shm);
  channel->name_peers(node_ranks);
  return channel;
}

ShmEndpoint::ShmEndpoint() {
  std::vector<int> everyone(static_cast<size_t>(size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  channel_ = open_shm_channel(*this, everyone, segment_node_);
  engine().add(channel_.get());
}

}  // namespace ibcoll::runtime
