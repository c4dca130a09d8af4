#include "runtime/ucx_transport.h"

#include <string>
#include <vector>

#include "runtime/bootstrap/set_up_exchange.h"

namespace ibcoll::runtime {

// Every rank holds every worker's address (a few hundred bytes each), as the verbs transport
// holds every endpoint address: at 65 536 ranks, megabytes per process. Asking the store for a
// peer's at its first message is what would keep it flat.
std::unique_ptr<transport::ucx::UcxChannel> open_ucx_channel(Job& job) {
  std::unique_ptr<transport::ucx::UcxChannel> channel;
  std::vector<std::string> addresses = exchange_set_up(job.bootstrap(), "ucx-address", [&] {
    channel =
        std::make_unique<transport::ucx::UcxChannel>(job.rank(), job.size(), job.config().ucx);
    return channel->local_address();
  });
  channel->set_peer_addresses(std::move(addresses));
  return channel;
}

}  // namespace ibcoll::runtime
