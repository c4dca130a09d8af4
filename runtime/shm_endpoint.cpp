#include "runtime/shm_endpoint.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <numeric>

#include "runtime/bootstrap/set_up_exchange.h"
#include "runtime/set_up_records.h"
#include "transport/shm/single_copy_calibration.h"

namespace ibcoll::runtime {

// The name says which job and node it belongs to without revealing the job's secret.
std::string segment_name_for(const std::string& secret, const std::string& node) {
  char name[40];
  std::snprintf(name, sizeof(name), "/ibcoll-%016zx",
                std::hash<std::string>()(secret + '\n' + node));
  return name;
}

namespace {

// The node's first two ranks' verdict on single copy, as the first one tells the others:
// "FROM BELOW DOES_NOT_WORK\nSUMMARY".
std::string single_copy_verdict_text(transport::shm::ShmChannel& channel, int local_rank,
                                     const Config& config) {
  using transport::shm::SingleCopyCalibration;
  SingleCopyCalibration measured = transport::shm::calibrate_single_copy(
      channel, 1 - local_rank, local_rank == 0, Deadline(config.timeout));
  if (local_rank != 0) return std::string();
  const auto outcome = config.pretend.single_copy;
  std::string pretended;
  if (outcome != CalibrationPretend::SingleCopy::measured && !measured.refused) {
    if (outcome == CalibrationPretend::SingleCopy::refused) {
      measured.refused = true;
    } else {
      measured.times =
          pretended_copy_times(outcome, transport::shm::single_copy_calibration_sizes());
    }
    pretended = pretended_note(config.pretend);
  }
  const transport::shm::SingleCopyVerdict verdict = transport::shm::single_copy_verdict(measured);
  return single_copy_record(
      {verdict.sizes.from, verdict.sizes.below, measured.refused, verdict.summary + pretended});
}

}  // namespace

OpenedShm open_shm_channel(Job& job, const std::vector<int>& node_ranks, const std::string& node) {
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
  const bool calibrate = job.config().calibrate_single_copy && local_size >= 2;
  exchange_set_up(bootstrap, "shm-created", [&] {
    if (!creator) return std::string();
    segment = std::make_unique<SharedSegment>(SharedSegment::create(name, bytes));
    try {
      ShmChannel::commit_shared_parts(*segment, local_size, calibrate);
    } catch (const Error&) {
      segment->unlink();
      throw;
    }
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
  OpenedShm opened{
      std::make_unique<ShmChannel>(local_rank, local_size, std::move(*segment), job.config().shm),
      {}};
  ShmChannel& channel = *opened.channel;
  channel.name_peers(node_ranks);
  // Once every rank has passed this exchange no name is left behind. The node's first two ranks
  // measure single copy against the rings on the way, and the exchange carries the verdict (the
  // first one's part) to the node's other ranks, so they all take the same path.
  const std::vector<std::string> parts = exchange_set_up(bootstrap, "shm-unlinked", [&] {
    if (!calibrate || local_rank > 1) return std::string();
    return single_copy_verdict_text(channel, local_rank, job.config());
  });
  if (calibrate) {
    const SingleCopyRecord verdict =
        read_single_copy_record(parts[static_cast<size_t>(node_ranks[0])], node_ranks[0]);
    channel.set_single_copy({verdict.from, verdict.below},
                            "measured at start-up: " + verdict.summary);
    if (verdict.from == 0) {
      opened.single_copy_off = verdict.refused ? "single copy does not work here"
                                               : "single copy loses to the rings here";
    }
  } else {
    channel.set_single_copy(channel.single_copy(), "IBCOLL_SHM_SINGLE_COPY");
    if (channel.single_copy().from == 0) opened.single_copy_off = "IBCOLL_SHM_SINGLE_COPY=0";
  }
  return opened;
}

ShmEndpoint::ShmEndpoint() {
  std::vector<int> everyone(static_cast<size_t>(size()));
  std::iota(everyone.begin(), everyone.end(), 0);
  channel_ = open_shm_channel(*this, everyone, segment_node_).channel;
  engine().add(channel_.get());
}

}  // namespace ibcoll::runtime
