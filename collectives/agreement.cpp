#include "collectives/agreement.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>

#include "base/log.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {
namespace {

constexpr uint8_t kUp = static_cast<uint8_t>(AgreementMessage::Kind::up);
constexpr uint8_t kDown = static_cast<uint8_t>(AgreementMessage::Kind::down);
// Views of one agreement take `members` sequence numbers; 64 agreements apart at least, a tag
// comes back only once the channel has forgotten it withdrew it (WithdrawnTags).
constexpr int kMostMembers = static_cast<int>(kAgreementSequences / 64);

void fold_into(std::vector<uint64_t>& into, const std::vector<uint64_t>& values,
               Agreement::Fold fold) {
  for (size_t w = 0; w < into.size(); ++w) {
    switch (fold) {
      case Agreement::Fold::bitwise_and:
        into[w] &= values[w];
        break;
      case Agreement::Fold::maximum:
        into[w] = std::max(into[w], values[w]);
        break;
      case Agreement::Fold::bitwise_or:
        into[w] |= values[w];
        break;
    }
  }
}

}  // namespace

Agreement::Agreement(transport::Channel& channel, std::shared_ptr<const Membership> membership,
                     uint64_t key, uint16_t id, uint32_t instance, Fold fold,
                     std::vector<uint64_t> mine, Settings settings)
    : channel_(channel),
      membership_(std::move(membership)),
      key_(key),
      id_(id),
      instance_(instance),
      fold_(fold),
      mine_(std::move(mine)),
      settings_(settings),
      inbox_bytes_(
          agreement_message_bytes(membership_->size(), static_cast<uint32_t>(mine_.size()))),
      view_(membership_->size()),
      spread_(membership_->size()),
      last_advance_(Clock::now()) {
  if (membership_->size() > kMostMembers) {
    throw Error(Code::not_supported, "agreement: a communicator of " +
                                         std::to_string(membership_->size()) +
                                         " members; at most " + std::to_string(kMostMembers));
  }
  if (mine_.size() > kMostAgreementValues) {
    throw Error(Code::internal, "agreement: " + std::to_string(mine_.size()) + " values");
  }
  advance();
}

Agreement::~Agreement() {
  withdraw_view();
}

uint64_t Agreement::tag(uint8_t kind) const {
  return agreement_tag(id_, instance_, static_cast<uint32_t>(membership_->size()),
                       static_cast<uint32_t>(failed_in_view_), kind);
}

void Agreement::advance() {
  if (!failure_.ok()) return;
  const Clock::time_point now = Clock::now();
  if (const Status* fenced = channel_.peer_failure(channel_.rank())) {
    fail(*fenced);
    return;
  }
  while (learn_failures())
    enter_view();
  for (size_t i = 0; i < partners_.size(); ++i) {
    if (!partners_[i].arrived) continue;
    take(i);
    if (!failure_.ok()) return;
    if (view_grew_) {
      while (learn_failures())
        enter_view();
      i = static_cast<size_t>(-1);  // a new view's partners: look at them all
    }
  }
  send_when_ready();
  keep_alive(now);
  last_advance_ = now;
}

bool Agreement::learn_failures() {
  const size_t known = channel_.failures_known();
  if (in_view_ && known == failures_seen_ && !view_grew_) return false;
  failures_seen_ = known;
  view_grew_ = false;
  bool grew = !in_view_;
  for (int m = 0; m < membership_->size(); ++m) {
    if (m == membership_->rank() || view_.contains(m)) continue;
    if (channel_.peer_failure(peer_of(m))) {
      view_.add(m);
      grew = true;
    }
  }
  return grew;
}

void Agreement::enter_view() {
  withdraw_view();
  in_view_ = true;
  ++views_entered_;
  failed_in_view_ = view_.count();
  for (int failed : view_.list()) {
    if (spread_.contains(failed)) continue;
    spread_.add(failed);
    spread(failed);
  }
  const Clock::time_point now = Clock::now();
  const int live = view_.outside_count();
  position_ = view_.outside_before(membership_->rank());
  const auto add = [&](int position, bool child) {
    Partner p;
    p.member = view_.outside_at(position);
    p.child = child;
    p.inbox.resize(inbox_bytes_);
    p.last_heard = now;
    partners_.push_back(std::move(p));
  };
  // A binomial tree over the live members: a parent's position is its child's with the lowest
  // set bit cleared.
  if (position_ > 0) add(position_ & (position_ - 1), false);
  const int below = position_ == 0 ? live : (position_ & -position_);
  for (int bit = 1; bit < below && position_ + bit < live; bit <<= 1)
    add(position_ + bit, true);
  for (size_t i = 0; i < partners_.size(); ++i)
    post(i);
  fold_values_ = mine_;
  carried_ = decision_;
  sent_up_ = sent_down_ = false;
  next_heartbeat_ = now + settings_.heartbeat;
  IBCOLL_LOG(debug, "agreement #" << instance_ << " on communicator " << id_ << ": view of "
                                  << view_.count() << " failed, position " << position_ << " of "
                                  << live);
}

void Agreement::post(size_t partner) {
  Partner& p = partners_[partner];
  // A receive of an earlier view that had completed (its peer failed) still reports after the
  // view withdrew it: only this view's count.
  channel_.recv(peer_of(p.member), tag(p.child ? kUp : kDown), p.inbox.data(), p.inbox.size(),
                [this, partner, view = views_entered_](const Status& status, size_t bytes) {
                  if (view != views_entered_) return;
                  Partner& arrived = partners_[partner];
                  arrived.arrived = true;
                  arrived.status = status;
                  arrived.bytes = bytes;
                });
}

void Agreement::take(size_t partner) {
  Partner& p = partners_[partner];
  p.arrived = false;
  const int peer = peer_of(p.member);
  if (p.status.code() == Code::truncated) {
    fail(Status(Code::mismatch, "agreement #" + std::to_string(instance_) + " on communicator " +
                                    std::to_string(id_) + ": rank " + std::to_string(peer) +
                                    " sent more than this agreement holds: it made another kind "
                                    "of agreement call (agree or shrink)"));
    return;
  }
  if (!p.status.ok()) {  // the peer failed (the view moves on), or its message was refused
    if (!channel_.peer_failure(peer)) post(partner);
    return;
  }
  const std::optional<AgreementMessage> m =
      decode_agreement(std::span<const std::byte>(p.inbox.data(), p.bytes), membership_->size());
  if (!m || m->key != key_ || m->instance != instance_) {
    // Garbage, or a late message of an earlier communicator with this id (its tags come back).
    if (!m) IBCOLL_LOG(warn, "agreement: a malformed message from rank " << peer << " dropped");
    post(partner);
    return;
  }
  p.last_heard = Clock::now();
  IBCOLL_LOG(trace, "agreement #" << instance_ << " on communicator " << id_ << ": "
                                  << (m->kind == AgreementMessage::Kind::up ? "up" : "down")
                                  << " from rank " << peer << " of the view holding "
                                  << m->view.count() << " failed");
  const size_t values = m->decision ? m->decision->values.size() : m->values.size();
  if (m->fold != static_cast<uint8_t>(fold_) || values != mine_.size() ||
      (m->kind == AgreementMessage::Kind::up) != p.child) {
    fail(Status(Code::mismatch, "agreement #" + std::to_string(instance_) + " on communicator " +
                                    std::to_string(id_) + ": rank " + std::to_string(peer) +
                                    " made another kind of agreement call (agree or shrink)"));
    return;
  }
  if (!(m->view == view_)) {
    for (int failed : m->view.list()) {
      if (failed == membership_->rank() || view_.contains(failed)) continue;
      channel_.hold_failed(
          peer_of(failed),
          Status(Code::peer_failed, "rank " + std::to_string(peer_of(failed)) + " failed (rank " +
                                        std::to_string(peer) + "'s agreement holds it failed)"));
      view_grew_ = true;
    }
    // A view this one holds more than: stale, and its sender will send again in this one.
    if (!view_grew_) post(partner);
    return;
  }
  if (p.reported) return;
  p.reported = true;
  if (p.child) {
    fold_into(fold_values_, m->values, fold_);
    if (m->decision && !carried_) carried_ = m->decision;
  } else {
    accept(*m->decision);
  }
}

void Agreement::accept(const AgreementDecision& decision) {
  if (!decision_) {
    decision_ = decision;
    IBCOLL_LOG(debug, "agreement #" << instance_ << " on communicator " << id_ << " decided ("
                                    << decision.failed.count() << " failed)");
  } else if (!(*decision_ == decision)) {
    IBCOLL_LOG(error, "agreement #" << instance_ << " on communicator " << id_
                                    << ": told a decision other than its own (kept its own)");
  }
}

void Agreement::send_when_ready() {
  if (!in_view_) return;
  const auto to_parent = [&] { return partners_.front().member; };
  if (!decision_) {
    if (sent_up_) return;
    for (const Partner& p : partners_) {
      if (p.child && !p.reported) return;
    }
    if (position_ > 0) {
      send(to_parent(), {AgreementMessage::Kind::up, static_cast<uint8_t>(fold_), key_, instance_,
                         view_, fold_values_, carried_});
      sent_up_ = true;
      return;
    }
    accept(carried_ ? *carried_ : AgreementDecision{fold_values_, view_});  // the leader
  }
  // Decided: what this member knows goes up and down at once in every view it enters.
  if (!sent_up_ && position_ > 0) {
    send(to_parent(), {AgreementMessage::Kind::up, static_cast<uint8_t>(fold_), key_, instance_,
                       view_, fold_values_, decision_});
  }
  sent_up_ = true;
  if (sent_down_) return;
  sent_down_ = true;
  for (const Partner& p : partners_) {
    if (p.child) {
      send(p.member, {AgreementMessage::Kind::down,
                      static_cast<uint8_t>(fold_),
                      key_,
                      instance_,
                      view_,
                      {},
                      decision_});
    }
  }
}

void Agreement::send(int member, const AgreementMessage& message) {
  outbox_.push_back(encode(message));
  const std::vector<std::byte>& bytes = outbox_.back();
  IBCOLL_LOG(trace, "agreement #" << instance_ << " on communicator " << id_ << ": "
                                  << (message.kind == AgreementMessage::Kind::up ? "up" : "down")
                                  << " to rank " << peer_of(member) << " in the view holding "
                                  << view_.count() << " failed");
  // What becomes of it does not matter here: a peer that failed moves the view on, and one that
  // refused it had moved on itself.
  channel_.send(peer_of(member), tag(static_cast<uint8_t>(message.kind)), bytes.data(),
                bytes.size(), [](const Status&, size_t) {});
  if (++messages_sent_ == settings_.exit_after_messages) {
    IBCOLL_LOG(warn, "agreement: dying after message " << messages_sent_ << " (IBCOLL_FAULT)");
    kill(getpid(), SIGKILL);
  }
}

void Agreement::keep_alive(Clock::time_point now) {
  if (decision_ || !in_view_) return;
  if (now - last_advance_ > settings_.fence_after / 2) {
    for (Partner& p : partners_)  // this member was stopped: no one heard from it either
      p.last_heard = now;
  }
  if (now >= next_heartbeat_) {
    next_heartbeat_ = now + settings_.heartbeat;
    for (const Partner& p : partners_)
      channel_.tell(peer_of(p.member), {transport::Notice::Kind::agreeing, key_, instance_});
  }
  for (const Partner& p : partners_) {
    const bool waited_on = p.child ? !p.reported && !sent_up_ : sent_up_ && !p.reported;
    if (!waited_on || now - p.last_heard < settings_.fence_after) continue;
    const int peer = peer_of(p.member);
    IBCOLL_LOG(warn, "agreement #" << instance_ << " on communicator " << id_ << ": rank " << peer
                                   << " said nothing for " << settings_.fence_after.count()
                                   << " ms: fenced out");
    channel_.fence(peer,
                   Status(Code::peer_failed, "rank " + std::to_string(peer) + " said nothing for " +
                                                 std::to_string(settings_.fence_after.count()) +
                                                 " ms (IBCOLL_TIMEOUT) while rank " +
                                                 std::to_string(channel_.rank()) +
                                                 " waited on it in an agreement: fenced out"));
  }
}

void Agreement::heard_from(int peer) {
  for (Partner& p : partners_) {
    if (peer_of(p.member) == peer) p.last_heard = Clock::now();
  }
}

void Agreement::spread(int failed_member) {
  const int n = membership_->size(), me = membership_->rank();
  const transport::Notice notice{transport::Notice::Kind::rank_gone,
                                 static_cast<uint64_t>(peer_of(failed_member)),
                                 static_cast<uint32_t>(Code::peer_failed)};
  const auto tell = [&](int partner) {
    if (partner != me && !view_.contains(partner)) channel_.tell(peer_of(partner), notice);
  };
  for (int distance = 1; distance < n; distance *= 2) {
    const int ahead = (me + distance) % n, behind = (me - distance % n + n) % n;
    tell(ahead);
    if (behind != ahead) tell(behind);
  }
}

void Agreement::fail(Status why) {
  IBCOLL_LOG(info,
             "agreement #" << instance_ << " on communicator " << id_ << ": " << why.message());
  failure_ = std::move(why);
  withdraw_view();
}

void Agreement::withdraw_view() {
  if (!in_view_) return;
  const uint64_t first = tag(0);
  channel_.cancel(first, first | 0xff);
  partners_.clear();
  outbox_.clear();
  in_view_ = false;
}

std::string Agreement::describe() const {
  std::string text = "agreement #" + std::to_string(instance_) + " on communicator " +
                     std::to_string(id_) + " of " + std::to_string(membership_->size()) + " ranks";
  if (!failure_.ok()) return text + ": failed (" + failure_.message() + ")";
  if (decision_) return text + ": decided";
  text += ": in the view holding " + std::to_string(view_.count()) + " failed, it waits for";
  bool any = false;
  for (const Partner& p : partners_) {
    if (p.reported || (p.child && sent_up_) || (!p.child && !sent_up_)) continue;
    text += std::string(any ? "," : "") + " rank " + std::to_string(peer_of(p.member)) +
            (p.child ? " (its fold)" : " (the decision)");
    any = true;
  }
  return any ? text : text + " nothing";
}

}  // namespace ibcoll::collectives
