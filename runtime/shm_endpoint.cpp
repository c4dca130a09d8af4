#include "runtime/shm_endpoint.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>

#include "runtime/bootstrap/set_up_exchange.h"
#include "transport/shm/single_copy_calibration.h"

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
  auto channel =
      std::make_unique<ShmChannel>(local_rank, local_size, std::move(*segment), job.config().shm);
  channel->name_peers(node_ranks);
  // Once every rank has passed this exchange no name is left behind. The node's first two ranks
  // measure single copy against the rings on the way, and the exchange carries the verdict (the
  // first one's part) to the node's other ranks, so they all take the same path.
  const bool calibrate = job.config().calibrate_single_copy && local_size >= 2;
  const std::vector<std::string> parts = exchange_set_up(bootstrap, "shm-unlinked", [&] {
    if (!calibrate || local_rank > 1) return std::string();
    const auto measured = transport::shm::calibrate_single_copy(
        *channel, 1 - local_rank, local_rank == 0, Deadline(job.config().timeout));
    return std::to_string(measured.sizes.from) + " " + std::to_string(measured.sizes.below) + "\n" +
           measured.summary;
  });
  if (calibrate) {
    const std::string& verdict = parts[static_cast<size_t>(node_ranks[0])];
    size_t below_at = 0;
    const size_t from = std::stoul(verdict, &below_at);
    const size_t below = std::stoul(verdict.substr(below_at));
    channel->set_single_copy({from, below},
                             "measured at start-up: " + verdict.substr(verdict.find('\n') + 1));
  } else {
    channel->set_single_copy(channel->single_copy(), "IBCOLL_SHM_SINGLE_COPY");
  }
  return channel;
}

ShmEndpoint::ShmEndpoint() {
  std::vector<int> everyone(static_cast<size_t>(size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  channel_ = open_shm_channel(*this, everyone, segment_node_);
  engine().add(channel_.get());
}

}  // namespace ibcoll::runtime
