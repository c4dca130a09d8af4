#include "transport/verbs/xrc_initiators.h"

#include <cstring>
#include <utility>

namespace ibcoll::transport::verbs {

XrcInitiators::PortKey XrcInitiators::key_of(const PortAddress& port) {
  PortKey key{};
  std::memcpy(key.data(), port.gid, sizeof(port.gid));
  std::memcpy(key.data() + sizeof(port.gid), &port.lid, sizeof(port.lid));
  return key;
}

XrcInitiators::Joined XrcInitiators::join(int peer, const PortAddress& port) {
  const PortKey key = key_of(port);
  auto [it, created] = by_port_.try_emplace(key);
  Initiator& ini = it->second;
  ++ini.users;
  if (created) {
    ini.port = key;
    ini.creator = peer;
    return {&ini, true, true};
  }
  if (ini.connected) return {&ini, false, true};
  ini.waiting.push_back(peer);
  return {&ini, false, false};
}

bool XrcInitiators::connect(Initiator& initiator, int peer, uint32_t target_qp_num,
                            std::vector<int>& ask) {
  if (initiator.connected || initiator.creator != peer) return false;
  initiator.connected = true;
  initiator.target_qp_num = target_qp_num;
  ask = std::exchange(initiator.waiting, {});
  return true;
}

XrcInitiators::Left XrcInitiators::leave(int peer, Initiator& initiator) {
  std::erase(initiator.waiting, peer);
  if (--initiator.users == 0) {
    Left left;
    if (initiator.qp) {
      left.retired = initiator.qp.get();
      retired_.push_back(std::move(initiator.qp));
    }
    if (initiator.abandoned) {
      std::erase_if(abandoned_,
                    [&](const ByPort::node_type& n) { return &n.mapped() == &initiator; });
    } else {
      by_port_.erase(by_port_.find(initiator.port));
    }
    return left;
  }
  if (initiator.connected || initiator.creator != peer) return {};
  initiator.creator = initiator.waiting.front();  // users > 0: someone waits
  initiator.waiting.erase(initiator.waiting.begin());
  return {initiator.creator, nullptr};
}

XrcInitiators::Left XrcInitiators::abandon(int peer, Initiator& initiator) {
  if (initiator.users > 1 && !initiator.abandoned) {
    ByPort::node_type node = by_port_.extract(initiator.port);
    node.mapped().abandoned = true;
    abandoned_.push_back(std::move(node));
  }
  return leave(peer, initiator);
}

}  // namespace ibcoll::transport::verbs
