// XrcInitiators: this process's XRC INI QPs, one per remote port, and the order in which the
// peers behind each are asked (the UdConnector's XRC bookkeeping, apart from the datagrams and
// the verbs calls, so that it is tested without an XRC device).
//
// The first peer that joins a port's INI is its creator: asked at once, it makes the TGT for
// the INI. The others wait, and are asked once the creator's answer has connected the INI,
// naming that TGT (a second TGT for one INI would be an INI connected twice). A creator that
// fails first hands the role to the next peer waiting. An INI that every peer has left is
// retired: kept until the connector closes, since sends posted on it may still complete, and a
// port asked again gets a new one. A peer whose node no longer has the INI's TGT (every process
// that held it has exited) abandons the INI: it leaves the port, kept by its other peers until
// they leave, and the peer joins the port's next INI, of which it is the creator if it is first.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "transport/verbs/device.h"
#include "transport/verbs/xrc_queue_pair.h"

namespace ibcoll::transport::verbs {

class XrcInitiators {
 public:
  using PortKey = std::array<uint8_t, 18>;  // a port's GID and LID
  struct Initiator {
    PortKey port{};
    std::unique_ptr<XrcInitiator> qp;  // the caller makes it when join() says `created`
    bool connected = false;            // to its TGT: the peers there may be asked
    int creator = -1;                  // the peer asked to make the TGT, while not connected
    uint32_t target_qp_num = 0;        // once connected
    std::vector<int> waiting;          // peers to ask once connected
    int users = 0;                     // peers that joined and have not left
    bool abandoned = false;            // no longer the port's: its TGT is gone
  };
  struct Joined {
    Initiator* initiator;
    bool created;  // a new INI, `peer` its creator: make its QP
    bool ask_now;  // send the peer its request now (false: it waits for the creator)
  };

  static PortKey key_of(const PortAddress& port);

  // `peer`, on `port`, will be sent to through the port's INI.
  Joined join(int peer, const PortAddress& port);
  // `peer` answered with its TGT: true if that connects `initiator` (the peer is its creator
  // and it was not connected); the peers to ask now are then in `ask`.
  bool connect(Initiator& initiator, int peer, uint32_t target_qp_num, std::vector<int>& ask);
  struct Left {
    int next_creator = -1;            // the peer to ask next as the INI's creator, if any
    XrcInitiator* retired = nullptr;  // the INI, if nobody uses it any more
  };
  // `peer` failed (or could not join: its INI's QP could not be made).
  Left leave(int peer, Initiator& initiator);
  // `peer`'s node refused the TGT that connected `initiator` (no process there holds it any
  // more): `peer` leaves it, and the port's next join makes a new one.
  Left abandon(int peer, Initiator& initiator);

  size_t size() const { return by_port_.size() + abandoned_.size(); }  // INIs in use
  size_t retired() const { return retired_.size(); }

 private:
  using ByPort = std::map<PortKey, Initiator>;
  ByPort by_port_;
  std::vector<ByPort::node_type> abandoned_;  // still used; taken out of the map, not moved
  std::vector<std::unique_ptr<XrcInitiator>> retired_;
};

}  // namespace ibcoll::transport::verbs
