// VerbsChannel, withdrawing operations (cancel) and hearing of a peer's withdrawals. Once
// cancel() returns, neither this process nor the device touches a withdrawn operation's buffer:
// a receive's registration is gone (a late RDMA write fails on the wire instead of landing, and
// takes the connection with it: that peer's QP fails), and a send whose RDMA writes are posted
// is waited for, since the device reads its buffer until they complete.
#include <vector>

#include "base/deadline.h"
#include "base/log.h"
#include "transport/verbs/verbs_channel.h"

namespace ibcoll::transport::verbs {
namespace {

bool in_range(uint64_t tag, uint64_t first, uint64_t last) {
  return tag >= first && tag <= last;
}

}  // namespace

// Both halves mark and erase first and pump the peers they touched after: pumping may post
// (and erase) other operations of these maps, or answer a receive this loop is about to
// withdraw.
void VerbsChannel::withdraw_receives(uint64_t first, uint64_t last) {
  matches_.remove_posted(first, last, [this](int peer) { --peers_[peer].open_ops; });
  // What came early for them will never be taken, nor what still comes: dropped, and a
  // request for a rendezvous refused, so that its sender stops waiting.
  withdrawn_tags_.add(first, last);
  std::vector<int> touched;
  matches_.remove_unexpected(first, last, [&](int peer, uint64_t tag, Arrival& a) {
    // A failed peer hears nothing more (its own failure ended its sends).
    if (a.type != wire::Type::rts || a.withdrawn || peers_[peer].failed) return;
    refuse_withdrawn(peer, tag, a.send_id);
    touched.push_back(peer);
  });
  peers_.for_each([&](int, Peer& p) {  // a message arriving part by part: the rest is dropped
    if (!p.assembly || !in_range(p.assembly->tag, first, last)) return;
    if (p.assembly->posted) --p.open_ops;
    p.assembly->posted.reset();
    p.assembly->held = {};
    p.assembly->dropped = true;
  });
  for (auto it = rendezvous_.begin(); it != rendezvous_.end();) {
    RendezvousRecv& r = it->second;
    if (!in_range(r.tag, first, last) || r.refused) {  // a refused one has ended already
      ++it;
      continue;
    }
    r.done = {};
    if (r.registration) {
      registrations_->revoke(r.registration);
      r.registration = nullptr;
    }
    touched.push_back(r.peer);
    if (!r.answered) {  // its answer, still queued, goes out as a refusal
      r.refused = true;
      r.refusal = wire::Refusal::withdrawn;
      ++it;
      continue;
    }
    Peer& p = peers_[r.peer];
    p.news.push_back({wire::Type::receive_withdrawn, r.tag, r.send_id});
    --p.open_ops;
    it = rendezvous_.erase(it);
  }
  for (int peer : touched)
    pump(peer);
}

void VerbsChannel::withdraw_sends(uint64_t first, uint64_t last) {
  bool writing = false;
  std::vector<int> touched;
  for (auto it = sends_.begin(); it != sends_.end();) {
    SendOp& op = it->second;
    if (!in_range(op.tag, first, last) || !op.done) {  // no completion: withdrawn already
      ++it;
      continue;
    }
    op.done = {};
    Peer& p = peers_[op.peer];
    touched.push_back(op.peer);
    // The receiver learns that what it waits for will not come: the rest of the writes (their
    // later chunks do not go), the writes themselves, or the rest of an eager message.
    const bool writes_unposted = op.chunks == 0 || op.chunks_posted < op.chunks;  // 0: none yet
    if (op.request_posted && writes_unposted) {
      p.news.push_back({wire::Type::send_withdrawn, op.tag, it->first});
    } else if (!op.request_posted && op.sent > 0) {  // cut between its parts
      p.news.push_back({wire::Type::send_withdrawn, op.tag, 0});
    }
    if (op.chunks_in_flight > 0) {  // the device reads the buffer until they complete
      writing = true;
      ++it;
      continue;
    }
    if (op.registration) registrations_->release(op.registration);
    --p.open_ops;
    it = sends_.erase(it);
  }
  for (int peer : touched)
    pump(peer);
  // Each write completes, or flushes back once its peer fails (the transport's retries, or
  // unanswered keepalives: IBCOLL_KEEPALIVE; on a shared XRC INI, fail_stuck_initiators); a
  // dead device ends them all. A peer that acknowledges its keepalives but not the writes for
  // longer than a call waits (IBCOLL_TIMEOUT) is failed, which flushes them back.
  const auto writing_to = [&] {
    for (const auto& [id, op] : sends_) {
      if (op.chunks_in_flight > 0 && in_range(op.tag, first, last)) return op.peer;
    }
    return -1;
  };
  const Deadline patience(options_.timeout);
  for (int peer = writing ? writing_to() : -1; peer >= 0; peer = writing_to()) {
    poll();
    if (patience.expired() && !peers_[peer].failed) {
      fail_peer(peer, Status(Code::timeout, "peer " + std::to_string(peer) +
                                                " took no RDMA write of a withdrawn send within " +
                                                std::to_string(options_.timeout.count()) +
                                                " ms (IBCOLL_TIMEOUT)"));
    }
  }
}

void VerbsChannel::on_send_withdrawn(int peer, uint64_t tag, uint32_t send_id) {
  Peer& p = peers_[peer];
  const Status why = withdrawn(peer, "sender");
  if (send_id == 0) {  // an eager message cut between its parts
    if (!p.assembly || p.assembly->tag != tag) return;
    if (p.assembly->posted) {
      completions_.add(std::move(p.assembly->posted->done), why, 0);
      --p.open_ops;
    } else if (!p.assembly->dropped) {
      // Held for no receive yet: one posted meanwhile fails now, one posted later when it
      // takes the message's place among the arrivals.
      if (auto posted = matches_.take_posted({peer, tag})) {
        completions_.add(std::move(posted->done), why, 0);
        --p.open_ops;
      } else {
        matches_.add_unexpected({peer, tag}, Arrival{wire::Type::eager, {}, 0, 0, true});
      }
    }
    p.assembly.reset();
    return;
  }
  for (auto it = rendezvous_.begin(); it != rendezvous_.end(); ++it) {
    RendezvousRecv& r = it->second;
    if (r.peer != peer || r.send_id != send_id) continue;
    completions_.add(std::move(r.done), why, 0);  // none if refused: it has ended
    if (r.registration) registrations_->revoke(r.registration);
    --p.open_ops;
    rendezvous_.erase(it);  // a queued answer finds nothing to send
    return;
  }
  // Not matched yet: the request waits among the arrivals, and a receive taking it fails.
  matches_.for_each_unexpected(peer, [&](uint64_t, Arrival& a) {
    if (a.type == wire::Type::rts && a.send_id == send_id) a.withdrawn = true;
  });
}

void VerbsChannel::on_receive_withdrawn(int peer, uint32_t send_id) {
  auto it = sends_.find(send_id);
  if (it == sends_.end() || it->second.peer != peer) return;  // ended, or withdrawn here too
  SendOp& op = it->second;
  op.cut = withdrawn(peer, "receiver");
  // Writes posted before the news fail on the wire (the receiver's buffer is deregistered),
  // and the connection with them; no later chunk goes (post_rdma_write), and a send with
  // writes in flight ends once they are done (on_write_done): until then they read its buffer.
  if (op.chunks_in_flight > 0) return;
  --peers_[peer].open_ops;
  end_send(it, op.cut, 0);  // a queued write finds nothing to send
}

}  // namespace ibcoll::transport::verbs
