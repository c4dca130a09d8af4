#include "transport/verbs/connection_manager.h"

#include <string>

namespace ibcoll::transport::verbs {

void ConnectionManager::set_peer_addresses(std::vector<EndpointAddress> addresses) {
  if (addresses.size() != static_cast<size_t>(setup_.size)) {
    throw Error(Code::invalid_argument, "peer addresses: expected " + std::to_string(setup_.size) +
                                            ", got " + std::to_string(addresses.size()));
  }
  const uint8_t mine = setup_.xrcd ? 1 : 0;
  for (size_t rank = 0; rank < addresses.size(); ++rank) {
    if (addresses[rank].xrc != mine) {
      throw Error(Code::mismatch,
                  "rank " + std::to_string(rank) + " connects through " + (mine ? "RC" : "XRC") +
                      " and rank " + std::to_string(setup_.rank) + " through " +
                      (mine ? "XRC" : "RC") +
                      ": XRC works on some nodes only; set IBCOLL_XRC=off (or on) for the job");
    }
  }
  addresses_ = std::move(addresses);
}

int ConnectionManager::peer_of_qp(uint32_t qp_num) const {
  auto it = peer_by_qp_.find(qp_num);
  return it == peer_by_qp_.end() ? -1 : it->second;
}

}  // namespace ibcoll::transport::verbs
