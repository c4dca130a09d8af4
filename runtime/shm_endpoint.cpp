#include "runtime/shm_endpoint.h"

#include <cstdio>
#include <functional>

namespace ibcoll::runtime {
namespace {

// The name says which job it belongs to without revealing the job's secret.
std::string segment_name_for(const std::string& secret) {
  char name[40];
  std::snprintf(name, sizeof(name), "/ibcoll-%016zx", std::hash<std::string>()(secret));
  return name;
}

}  // namespace

ShmEndpoint::ShmEndpoint() : segment_name_(segment_name_for(launch().secret)) {
  using transport::shm::SharedSegment;
  using transport::shm::ShmChannel;
  const size_t bytes = ShmChannel::segment_bytes(size());
  std::unique_ptr<SharedSegment> segment;
  if (rank() == 0) {
    segment = std::make_unique<SharedSegment>(SharedSegment::create(segment_name_, bytes));
    store().barrier("shm-created");
  } else {
    store().barrier("shm-created");
    segment = std::make_unique<SharedSegment>(
        SharedSegment::open(segment_name_, bytes, config().timeout));
  }
  store().barrier("shm-attached");  // every rank has it mapped: the name can go
  if (rank() == 0) segment->unlink();
  store().barrier("shm-unlinked");  // set-up leaves nothing behind on any rank's return
  channel_ = std::make_unique<ShmChannel>(rank(), size(), std::move(*segment));
  engine().add(channel_.get());
}

}  // namespace ibcoll::runtime
