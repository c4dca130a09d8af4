#include "runtime/verbs_endpoint.h"

#include <cstring>

#include "base/status.h"
#include "runtime/bootstrap/set_up_exchange.h"

namespace ibcoll::runtime {

std::unique_ptr<transport::verbs::VerbsChannel> open_verbs_channel(Job& job) {
  using transport::verbs::EndpointAddress;
  std::unique_ptr<transport::verbs::VerbsChannel> channel;
  const auto gathered = exchange_set_up(job.bootstrap(), "verbs-address", [&] {
    channel = std::make_unique<transport::verbs::VerbsChannel>(job.rank(), job.size(),
                                                               job.config().verbs);
    const EndpointAddress mine = channel->local_address();
    std::string bytes(sizeof(mine), '\0');
    std::memcpy(bytes.data(), &mine, sizeof(mine));
    return bytes;
  });
  std::vector<EndpointAddress> all(gathered.size());
  for (size_t r = 0; r < all.size(); ++r) {
    if (gathered[r].size() != sizeof(EndpointAddress)) {
      throw Error(Code::mismatch, "rank " + std::to_string(r) +
                                      " published a verbs address of another ibcoll version");
    }
    std::memcpy(&all[r], gathered[r].data(), sizeof(EndpointAddress));
  }
  channel->set_peer_addresses(std::move(all));
  return channel;
}

VerbsEndpoint::VerbsEndpoint() : channel_(open_verbs_channel(*this)) {
  engine().add(channel_.get());
}

}  // namespace ibcoll::runtime
