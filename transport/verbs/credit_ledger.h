// CreditLedger: the receive side of credit flow control. The SRQ's credited buffers (their
// number is the capacity) are lent to the peers that connect, never sized by the job: each
// connected peer's share is capacity / (connected peers + 1), at most the per-peer cap, at least
// one, so a share stays free for the next peer; while more peers are connected than there are
// credits, those without one wait in turn (and their sends wait on the others' progress).
//  - A peer starts with its share, or what is free (maybe nothing).
//  - A credit comes home when one of the peer's credited messages is consumed. It goes back to
//    the same peer while that peer is within its share and nobody waits; else it joins the free
//    pool, which goes to the waiting peers first come, first served.
//  - A new peer shrinks the shares: peers over theirs are asked to give back the excess they
//    hold unused (an idle peer would otherwise keep it for ever, and the share kept free for
//    the next peer, or a newcomer that found too little free, would never get it).
//  - While peers wait and nothing is free, the credits of peers idle for a while are recalled
//    too (with more peers than credits, those that stopped sending would hold them for good).
// So the credits lent never exceed the capacity: a many-to-one burst cannot overrun the SRQ,
// whatever the number of peers. The ledger only counts; the channel sends what it says.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

#include "base/deadline.h"
#include "transport/peer_map.h"

namespace ibcoll::transport::verbs {

class CreditLedger {
 public:
  // What the channel must tell a peer: credits to send it, credits to ask back from it.
  struct Notice {
    int peer;
    uint32_t grant = 0;
    uint32_t recall = 0;
  };

  // `capacity` ≥ 1 credits in all, `cap` ≥ 1 at most per peer; peers are job ranks.
  CreditLedger(uint32_t capacity, uint32_t cap);

  // The credits `peer` starts with, told in the connection handshake; the same on every call
  // (a handshake may be sent again).
  uint32_t open(int peer, Clock::time_point now);
  // One of the peer's credited messages was consumed. True: the credit goes back to the peer
  // (the channel adds it to what it returns); false: it went to the pool (see notices()).
  bool came_home(int peer, Clock::time_point now);
  // The peer gave back `count` unused credits, answering a recall.
  void given_back(int peer, uint32_t count);
  // The peer failed: everything lent to it is home.
  void close(int peer);
  // While peers wait and nothing is free: recalls what peers that sent nothing for `idle` hold.
  void recall_idle(Clock::time_point now, Clock::duration idle);
  // Grants and recalls for peers other than the one an operation was about, in order; the
  // channel takes them after each call.
  std::vector<Notice>& notices() { return notices_; }

  uint32_t share() const { return share_; }
  uint32_t lent(int peer) const {
    const Account* a = accounts_.find(peer);
    return a ? a->lent : 0;
  }
  uint32_t free() const { return free_; }
  uint32_t lent_in_all() const { return capacity_ - free_; }
  int open_peers() const { return static_cast<int>(open_.size()); }

 private:
  struct Account {
    uint32_t lent = 0;              // credits the peer holds, has in flight, or is owed by us
    uint32_t first = 0;             // what open() granted
    uint32_t recalled = 0;          // asked back and not yet answered
    Clock::time_point last_home{};  // when a message of the peer's was last consumed
    bool is_open = false, waiting = false;
  };
  void wait_in_line(int peer);
  void hand_out();  // the free pool to the waiting peers
  void recall_excess();
  void update_share();

  uint32_t capacity_, cap_, free_, share_ = 1;
  PeerMap<Account> accounts_;  // the peers that ever opened
  std::vector<int> open_;      // peers with an account, for recalls
  std::deque<int> waiting_;    // below their share, first come first served
  std::vector<Notice> notices_;
};

}  // namespace ibcoll::transport::verbs
