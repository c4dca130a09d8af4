#include "transport/verbs/connection_manager.h"

#include <string>

namespace ibcoll::transport::verbs {

void ConnectionManager::set_peer_addresses(std::vector<EndpointAddress> addresses) {
  if (addresses.size() != static_cast<size_t>(setup_.size)) {
    throw Error(Code::invalid_argument, "peer addresses: expected " + std::to_string(setup_.size) +
                                            ", got " + std::to_string(addresses.size()));
  }
  addresses_ = std::move(addresses);
}

int ConnectionManager::peer_of_qp(uint32_t qp_num) const {
  auto it = peer_by_qp_.find(qp_num);
  return it == peer_by_qp_.end() ? -1 : it->second;
}

}  // namespace ibcoll::transport::verbs
