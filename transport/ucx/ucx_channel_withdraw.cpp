// UcxChannel::cancel. Once it returns, nothing of a withdrawn operation's buffer is touched:
// eager sends went from a copy, a request not yet answered is withdrawn (its data never goes),
// a receive whose data has not begun refuses it, and data already moving (UCX's rendezvous,
// which 1.13 cannot stop) is waited for, within the liveness limit, then its endpoint is
// closed by force.
#include <utility>
#include <vector>

#include "transport/ucx/ucx_channel.h"

namespace ibcoll::transport::ucx {

void UcxChannel::cancel(uint64_t first, uint64_t last) {
  auto in_range = [&](uint64_t tag) { return tag >= first && tag <= last; };
  withdrawn_tags_.add(first, last);
  matches_.remove_posted(first, last, [](int) {});
  // A request that came early will never be answered now: refused, so its sender stops waiting.
  std::vector<std::pair<int, uint32_t>> refusals;
  matches_.remove_unexpected(first, last, [&](int peer, uint64_t, Arrival& a) {
    if (a.type == UcxHeader::Type::request && !a.withdrawn) refusals.emplace_back(peer, a.send_id);
  });
  std::vector<std::pair<InFlight::Of, uint32_t>> moving;
  std::vector<uint32_t> ended;
  for (auto& [id, r] : rendezvous_) {
    if (!in_range(r.tag) || r.withdrawn) continue;
    r.done = {};
    r.withdrawn = true;  // its data, arriving later, is refused
    if (r.request) {
      moving.emplace_back(InFlight::Of::rendezvous_recv, id);
    } else {
      if (!peers_[r.peer].failed) {
        send_control(r.peer, UcxHeader::Type::receive_withdrawn, r.tag, r.send_id, 0);
      }
      ended.push_back(id);
    }
  }
  for (uint32_t id : ended)
    rendezvous_.erase(id);
  ended.clear();
  for (auto& [id, op] : sends_) {
    if (!in_range(op.tag) || op.withdrawn) continue;
    op.done = {};
    op.withdrawn = true;
    const bool data_moving = op.request && op.data_posted;
    if (data_moving) {
      moving.emplace_back(InFlight::Of::send, id);
    } else if (op.asked || op.answered) {  // its data never goes; the receiver hears so
      if (!peers_[op.peer].failed) {
        send_control(op.peer, UcxHeader::Type::send_withdrawn, op.tag, id, 0);
      }
      op.answered = false;
    }
    if (!op.request) ended.push_back(id);  // else erased once UCX is done with it
  }
  for (uint32_t id : ended)
    sends_.erase(id);
  for (auto [peer, send_id] : refusals) {
    if (!peers_[peer].failed) send_control(peer, UcxHeader::Type::answer, 0, send_id, 0, 0);
  }
  wait_out(moving);
}

}  // namespace ibcoll::transport::ucx
