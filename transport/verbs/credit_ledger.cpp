#include "transport/verbs/credit_ledger.h"

#include <algorithm>

namespace ibcoll::transport::verbs {

CreditLedger::CreditLedger(uint32_t capacity, uint32_t cap)
    : capacity_(std::max(1u, capacity)), cap_(std::max(1u, cap)), free_(capacity_) {
  update_share();
}

// One more peer than are connected: a share is kept free for the next to connect, so that it
// starts sending at once, not after the others answer a recall (they may not be polling).
// Computed when a peer opens or closes, not for every message that comes home.
void CreditLedger::update_share() {
  const auto peers = static_cast<uint32_t>(open_.size() + 1);
  share_ = std::clamp(capacity_ / peers, 1u, cap_);
}

uint32_t CreditLedger::open(int peer, Clock::time_point now) {
  Account& a = accounts_[peer];
  if (a.is_open) return a.first;
  a = Account{};
  a.is_open = true;
  a.last_home = now;
  open_.push_back(peer);
  update_share();
  a.first = a.lent = std::min(share(), free_);
  free_ -= a.lent;
  if (a.lent < share()) wait_in_line(peer);
  recall_excess();  // the shares shrank: what is over them comes back, for the next peer
  return a.first;
}

bool CreditLedger::came_home(int peer, Clock::time_point now) {
  Account* found = accounts_.find(peer);
  if (!found || !found->is_open || found->lent == 0) return false;  // a lying or closed peer's
  Account& a = *found;
  a.last_home = now;
  const uint32_t fair = share();
  if (a.lent < fair || (a.lent == fair && waiting_.empty())) return true;
  --a.lent;
  ++free_;
  if (a.lent < fair) wait_in_line(peer);  // behind those already waiting
  hand_out();
  return false;
}

void CreditLedger::given_back(int peer, uint32_t count) {
  Account* found = accounts_.find(peer);
  if (!found || !found->is_open) return;
  Account& a = *found;
  count = std::min(count, a.lent);
  a.lent -= count;
  a.recalled = 0;
  free_ += count;
  if (a.lent < share()) wait_in_line(peer);
  hand_out();
}

void CreditLedger::close(int peer) {
  Account* found = accounts_.find(peer);
  if (!found || !found->is_open) return;
  Account& a = *found;
  free_ += a.lent;
  a = Account{};
  std::erase(open_, peer);  // waiting_ skips it when its turn comes
  update_share();
  hand_out();
}

void CreditLedger::wait_in_line(int peer) {
  Account& a = accounts_[peer];
  if (a.waiting) return;
  a.waiting = true;
  waiting_.push_back(peer);
}

void CreditLedger::hand_out() {
  const uint32_t fair = share();
  while (free_ > 0 && !waiting_.empty()) {
    const int peer = waiting_.front();
    waiting_.pop_front();
    Account& a = accounts_[peer];
    a.waiting = false;
    if (!a.is_open || a.lent >= fair) continue;
    const uint32_t grant = std::min(free_, fair - a.lent);
    a.lent += grant;
    free_ -= grant;
    notices_.push_back({peer, grant, 0});
    if (a.lent < fair) wait_in_line(peer);
  }
}

void CreditLedger::recall_idle(Clock::time_point now, Clock::duration idle) {
  if (free_ > 0 || waiting_.empty()) return;
  for (int peer : open_) {
    Account& a = accounts_[peer];
    if (a.lent == 0 || a.recalled != 0 || now - a.last_home < idle) continue;
    a.recalled = a.lent;
    notices_.push_back({peer, 0, a.recalled});
  }
}

void CreditLedger::recall_excess() {
  const uint32_t fair = share();
  for (int peer : open_) {
    Account& a = accounts_[peer];
    if (a.lent <= fair || a.recalled != 0) continue;
    a.recalled = a.lent - fair;
    notices_.push_back({peer, 0, a.recalled});
  }
}

}  // namespace ibcoll::transport::verbs
