#include "collectives/probe_desk.h"

#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "collectives/allreduce/folding.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {
namespace {
constexpr uint32_t kLooksPerClock = 64;  // a clock read per this many looks at a wait
}  // namespace

void ProbeRoster::serve_all() {
  while (!listed_.empty()) {
    ProbeDesk* desk = listed_.back();
    listed_.pop_back();
    desk->shared_->listed = false;
    try {
      desk->serve();
    } catch (const Error& e) {
      desk->shared_->news = true;
      IBCOLL_LOG(debug, "a probe desk is left to its own communicator's next call: "
                            << e.status().to_string());
    }
  }
}

ProbeDesk::ProbeDesk(transport::Channel& channel, std::span<const int> peers, int rank, uint16_t id,
                     uint64_t first_sequence, std::chrono::milliseconds after, ProbeRoster* roster)
    : channel_(channel),
      peers_(peers),
      tag_(call_tag(id, 0)),
      after_(after),
      shared_(std::make_shared<Shared>()),
      partners_(shared_->partners),
      next_sequence_(first_sequence) {
  shared_->first_sequence = first_sequence;
  shared_->desk = this;
  shared_->roster = roster;
  const Folding folding(static_cast<int>(peers.size()));
  std::vector<int> members;
  if (folding.sits_out(rank)) {
    members.push_back(rank + 1);
  } else {
    if (folding.paired(rank)) members.push_back(rank - 1);
    const int v = folding.virtual_rank(rank);
    for (int mask = 1; mask < folding.pof2; mask <<= 1)
      members.push_back(folding.member_of(v ^ mask));
  }
  partners_.resize(members.size());
  for (size_t i = 0; i < members.size(); ++i)
    partners_[i].member = members[i];
}

ProbeDesk::~ProbeDesk() {
  channel_.cancel(tag_, tag_ + kStepsPerCall - 1);
  shared_->desk = nullptr;
  if (shared_->listed) std::erase(shared_->roster->listed_, this);
}

void ProbeDesk::record(uint64_t first, uint64_t last, const CallSignature& signature) {
  calls_[calls_kept_++ % kKept] = {first, last, signature};
  next_sequence_ = last + 1;
}

void ProbeDesk::ended(uint64_t sequence, const Status& verdict, const CheckFields& fields) {
  if (verdict.code() == Code::mismatch) failed(sequence, fields);
}

void ProbeDesk::failed(uint64_t sequence, const CheckFields& fields) {
  failures_[failures_kept_++ % failures_.size()] = {sequence, fields};
  for (Call& call : calls_)
    if (call.first == sequence) call.failed = true;
  for (Partner& p : partners_)
    p.notice = sequence;
  shared_->news = true;
  serve();
}

const CheckFields* ProbeDesk::failure_of(uint64_t sequence) const {
  for (const Failure& f : failures_)
    if (f.sequence == sequence) return &f.fields;
  return nullptr;
}

ProbeDesk::Partner* ProbeDesk::partner(int member) {
  for (Partner& p : partners_)
    if (p.member == member) return &p;
  return nullptr;
}

void ProbeDesk::post_receive(size_t index) {
  Partner& p = partners_[index];
  p.receiving = true;
  channel_.recv(peers_[static_cast<size_t>(p.member)], tag_, &p.in, sizeof p.in,
                [shared = shared_, index](const Status& status, size_t bytes) {
                  arrived(*shared, index, status, bytes);
                });
}

void ProbeDesk::list(Shared& shared) {
  if (!shared.roster || !shared.desk || shared.listed) return;
  shared.listed = true;
  shared.roster->listed_.push_back(shared.desk);
}

// In the channel's poll: only note what came; serve() answers and posts the next receive.
void ProbeDesk::arrived(Shared& shared, size_t index, const Status& status, size_t bytes) {
  Partner& p = shared.partners[index];
  p.receiving = false;
  shared.news = true;
  list(shared);
  if (!status.ok()) {  // the partner failed, or withdrew: the calls waiting on it learn so
    p.closed = true;
    return;
  }
  if (bytes < kNoteHeader || p.in.sequence < shared.first_sequence)
    return;  // an earlier communicator's
  const size_t fields = bytes - kNoteHeader;
  if (p.in.kind == Kind::probe) {
    p.probe = p.in;
    p.probe_bytes = fields;
    p.probe_waits = true;
  } else {
    p.answer = p.in;
    p.answer_bytes = fields;
    p.has_answer = true;
  }
}

void ProbeDesk::serve() {
  if (!shared_->news) return;
  shared_->news = false;
  for (size_t i = 0; i < partners_.size(); ++i) {
    Partner& p = partners_[i];
    if (!p.receiving && !p.closed) post_receive(i);
    if (p.probe_waits && !answer(p)) shared_->news = true;  // look again at the next call or send
    if (p.notice != 0 && !p.closed) {
      if (p.sending) {
        shared_->news = true;
      } else {
        send(i, p.notice, Kind::failed, failure_of(p.notice));
        p.notice = 0;
      }
    }
  }
}

bool ProbeDesk::answer(Partner& p) {
  const uint64_t sequence = p.probe.sequence;
  if (sequence >= next_sequence_) return false;  // a call this member has not made yet
  if (p.sending) return false;
  p.probe_waits = false;
  const auto index = static_cast<size_t>(&p - partners_.data());
  for (const Call& call : calls_) {
    if (sequence < call.first || sequence > call.last) continue;
    const CheckFields mine(call.signature);
    if (call.failed) {
      const CheckFields* ended = failure_of(sequence);
      send(index, sequence, Kind::failed, ended ? ended : &mine);
      return true;
    }
    CheckFields seen = mine;
    if (call.first != sequence || seen.fold(p.probe.fields.data(), p.probe_bytes) == 0 ||
        !seen.verdict().ok()) {
      send(index, sequence, Kind::differs, &mine);
      differing_sequence_ = sequence;
      differing_member_ = p.member;
      differing_probe_ = p.probe;
      differing_bytes_ = p.probe_bytes;
    }
    return true;  // a call that agrees: its messages are sent or will be
  }
  // Older than the calls kept: it may still run here (non-blocking calls), so no answer; the
  // prober waits, as for a slow partner, within its deadline.
  return true;
}

void ProbeDesk::send(size_t index, uint64_t sequence, Kind kind, const CheckFields* fields) {
  Partner& p = partners_[index];
  p.out.sequence = sequence;
  p.out.kind = kind;
  const size_t bytes = kNoteHeader + (fields ? fields->write(p.out.fields.data()) : 0);
  p.sending = true;
  channel_.send(peers_[static_cast<size_t>(p.member)], tag_, &p.out, bytes,
                [shared = shared_, index](const Status&, size_t) {
                  shared->partners[index].sending = false;
                  shared->news = true;  // an answer or notice may wait for this send
                  list(*shared);
                });
}

Status ProbeDesk::wait_on(Timer& timer, int member, uint64_t sequence, CheckFields& fields) {
  serve();
  auto mismatch = [&](int from, const Note& theirs, size_t bytes) {
    fields.fold(theirs.fields.data(), bytes);
    Status verdict = fields.verdict();
    if (verdict.ok()) {
      verdict =
          Status(Code::mismatch,
                 "rank " + std::to_string(from) + " (job rank " +
                     std::to_string(peers_[static_cast<size_t>(from)]) + ") " +
                     (theirs.kind == Kind::failed ? "failed this call: other ranks' calls differed"
                                                  : "made another call"));
    }
    failed(sequence, fields);
    return verdict;
  };
  if (differing_sequence_ == sequence) {
    return mismatch(differing_member_, differing_probe_, differing_bytes_);
  }
  Partner* p = partner(member);
  if (!p) return {};
  if (p->has_answer && p->answer.sequence == sequence) {
    return mismatch(member, p->answer, p->answer_bytes);
  }
  if (++timer.looks % kLooksPerClock != 0 || p->sending) return {};
  const Clock::time_point now = Clock::now();
  if (timer.probe_at == Clock::time_point{}) {
    timer.probe_at = now + after_;
  } else if (now >= timer.probe_at) {
    send(static_cast<size_t>(p - partners_.data()), sequence, Kind::probe, &fields);
    timer.probe_at = now + after_;
  }
  return {};
}

}  // namespace ibcoll::collectives
