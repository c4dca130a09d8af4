#include "collectives/operation.h"

#include "collectives/registry.h"

namespace ibcoll::collectives {

namespace {
constexpr uint32_t kAdvancesPerMemberCheck = 1024;
}  // namespace

Operation::Operation(std::unique_ptr<CollectiveTask> task, std::unique_ptr<CallCheck> check,
                     transport::Channel& channel, std::span<const int> members, uint64_t base_tag,
                     uint64_t last_tag, uint64_t first_sequence, Collective collective,
                     const char* algorithm, const Revocation& revocation)
    : task_(std::move(task)),
      check_(std::move(check)),
      channel_(channel),
      members_(members),
      base_tag_(base_tag),
      last_tag_(last_tag),
      first_sequence_(first_sequence),
      collective_(collective),
      algorithm_(algorithm),
      revocation_(revocation) {}

std::string Operation::describe() const {
  const std::string call = describe_call(collective_, algorithm_, base_tag_,
                                         static_cast<int>(members_.size()), first_sequence_);
  if (state_ != State::running) return call + ": it has ended (" + status_.to_string() + ")";
  return call + ": it waits for " +
         (checking_ ? check_->waiting() + " (the call check)" : task_->waiting()) +
         (earlier_ ? "; and for this rank's call before it, which returned early: " +
                         earlier_->describe()
                   : "");
}

void Operation::take_earlier(const Operation& earlier) {
  const Status& failure = earlier.status();
  if (failure.ok() || !earlier_verdict_.ok()) return;
  earlier_verdict_ = reported_later("this rank's call before this one", failure);
}

const Status* failed_among(const transport::Channel& channel, std::span<const int> members) {
  for (int member : members) {
    if (member == channel.rank()) continue;
    if (const Status* failure = channel.peer_failure(member)) return failure;
  }
  return nullptr;
}

const Status* Operation::failed_member() {
  if (++advances_ % kAdvancesPerMemberCheck != 0) return nullptr;
  return failed_among(channel_, members_);
}

Status Operation::with_known_cause(Status status) const {
  if (status.code() != Code::peer_failed) return status;
  const Status* gone = failed_among(channel_, members_);
  if (!gone || status.message().find(gone->message()) != std::string::npos) return status;
  return Status(Code::peer_failed, gone->message() + "; here: " + status.message());
}

Operation::~Operation() {
  if (state_ == State::running) abandon(Status(Code::internal, "operation destroyed"));
}

void Operation::start() {
  checking_ = check_ != nullptr;
  if (checking_) {
    check_->start();
  } else {
    task_->start();
  }
}

Operation::State Operation::advance() {
  if (state_ != State::running) return state_;
  if (revocation_.revoked()) return finish(revocation_.why());
  if (earlier_ && earlier_->advance() != State::running) {
    take_earlier(*earlier_);
    earlier_.reset();
  }
  if (const Status* failure = failed_member()) return finish(*failure);
  if (checking_) {
    if (check_->advance() == State::running) return State::running;
    if (Status verdict = check_->verdict(); !verdict.ok()) return finish(std::move(verdict));
    if (earlier_verdict_.ok()) earlier_verdict_ = check_->earlier_verdict();
    checking_ = false;
    task_->start();
  }
  if (!task_done_) {
    const State task_state = task_->advance();
    if (task_state == State::running) return State::running;
    if (!task_->status().ok()) return finish(task_->status());
    task_done_ = true;
  }
  if (earlier_) return State::running;  // its verdict is this call's to report
  return finish(earlier_verdict_);
}

void Operation::abandon(const Status& why) {
  if (state_ == State::running) finish(why);
}

Operation::State Operation::finish(Status status) {
  status_ = with_known_cause(std::move(status));
  state_ = status_.ok() ? State::done : State::failed;
  if (!status_.ok()) {
    channel_.cancel(base_tag_, last_tag_);
    if (check_) check_->abandon(status_);
    task_->abandon(status_);
    if (earlier_) earlier_->abandon(status_);
  }
  earlier_.reset();
  return state_;
}

}  // namespace ibcoll::collectives
