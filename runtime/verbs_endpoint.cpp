#include "runtime/verbs_endpoint.h"

#include <cstring>

#include "base/status.h"

namespace ibcoll::runtime {

VerbsEndpoint::VerbsEndpoint()
    : channel_(std::make_unique<transport::verbs::VerbsChannel>(rank(), size(), config().verbs)) {
  using transport::verbs::EndpointAddress;
  const EndpointAddress mine = channel_->local_address();
  std::string bytes(sizeof(mine), '\0');
  std::memcpy(bytes.data(), &mine, sizeof(mine));
  const auto gathered = store().allgather("verbs-address", bytes);
  std::vector<EndpointAddress> all(gathered.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (gathered[r].size() != sizeof(EndpointAddress)) {
      throw Error(Code::mismatch, "rank " + std::to_string(r) +
                                      " published a verbs address of another ibcoll version");
    }
    std::memcpy(&all[r], gathered[r].data(), sizeof(EndpointAddress));
  }
  channel_->set_peer_addresses(std::move(all));
  engine().add(channel_.get());
}

}  // namespace ibcoll::runtime
