// CollectiveTask: one running collective, a resumable state machine. start() posts its first
// messages; advance() looks at what completed and posts the next step, never blocking; it
// reports in progress, done or failed. Tasks talk to peers only through a Group's channel, and
// tag every message with the collective's base tag plus the step, so collectives in flight at
// once never take each other's messages.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/function_ref.h"
#include "base/status.h"
#include "collectives/call_memory.h"
#include "collectives/datatype.h"
#include "collectives/slot_group.h"
#include "transport/channel.h"

namespace ibcoll::collectives {

class NodeLayout;
class ProbeDesk;

// The ranks taking part, as channel peers: member i of the group is channel peer peers[i].
struct Group {
  transport::Channel& channel;
  int rank;                      // this process's index in `peers`
  std::span<const int> peers;    // channel peer of every member (the communicator's list)
  SlotGroup* slots = nullptr;    // when every member shares this node's slot region
  uint64_t slot_sequence = 0;    // this call's turn in the slots
  NodeLayout* layout = nullptr;  // when the members span nodes (the hierarchical algorithms)
  uint64_t first_sequence = 1;   // of the communicator's first call (to number calls in reports)
  ProbeDesk* probes = nullptr;   // when calls are checked by messages (probe_desk.h)
  int size() const { return static_cast<int>(peers.size()); }
};

struct CollectiveArgs {
  const void* send = nullptr;  // == recv for in place
  void* recv = nullptr;
  size_t count = 0;
  DataType type = DataType::uint8;
  ReduceOp op = ReduceOp::sum;  // allreduce
  int root = 0;                 // bcast: its data is in `recv`
  uint64_t agreed = 0;          // a digest every rank must pass alike (communicator creation)
};

// Drives progress (the transports, every other call in flight) until done() holds; throws
// Error(timeout) once the deadline passes, its message saying what `describe()` says (the call
// and what it waits for; asked only then, and by a hang report). A call run to its end on its
// caller's stack hands in its own looks as done().
using WaitUntil = FunctionRef<void(FunctionRef<bool()> done, FunctionRef<std::string()> describe)>;

class CollectiveTask : public CallObject {
 public:
  enum class State { running, done, failed };

  CollectiveTask(const Group& group, const CollectiveArgs& args, uint64_t base_tag)
      : group_(group), args_(args), base_tag_(base_tag) {}
  virtual ~CollectiveTask() = default;

  virtual void start() = 0;
  // Moves as far as the completed messages allow. Call after progress(); cheap when idle.
  virtual State advance() = 0;
  // The call ended badly (a deadline passed, a member failed): a task holding a shared turn
  // (the slot region's) gives it up, so the members learn it. Messages are withdrawn by the
  // operation.
  virtual void abandon(const Status& why) { (void)why; }
  // What the task waits for now, in words naming members ("a message from rank 3 (job rank
  // 12) in step 2"), for a timeout's error and a hang report. By default its messages still
  // under way.
  virtual std::string waiting() const;
  // Whether the caller may have the call back while the task runs on: nothing it does from now
  // reads or writes the caller's buffers, and no member waits for anything it has yet to send,
  // its sends complete (the channel needs no more progress on this rank for them): what is left
  // is learning the others' verdict. An Operation allowed to return early
  // (Operation::return_early) then does.
  virtual bool caller_done() const { return false; }
  const Status& status() const { return messages_ ? messages_->status : kNoFailure; }

 protected:
  // Posts a send/receive of step `step` (0..kAlgorithmSteps-1); its completion is counted in
  // messages_. Messages between two members with one step match in the order posted, so a
  // pipelined algorithm may send many under one step. The index lets it ask for each one.
  // A receive that is not `exact` accepts a shorter or longer (truncated) message, and
  // received() says how much came: for a call check, which must go on when calls differ.
  // Longer than the channel's largest message (verbs: 4 GiB), a message travels as pieces of
  // that size under the same step, in order; it completes with its last piece.
  size_t send_to(int member, uint32_t step, const void* data, size_t bytes);
  size_t recv_from(int member, uint32_t step, void* data, size_t bytes, bool exact = true);
  size_t received(size_t message) const { return messages_->at(message).received; }
  bool step_done() const { return !messages_ || messages_->pending == 0; }
  // Every send posted has completed: the channel holds none of its data any more.
  bool sends_done() const { return !messages_ || messages_->sends_pending == 0; }
  bool completed(size_t message) const { return messages_->at(message).completed; }
  // Fails the task with `status` (for failures that are not a message's).
  void fail(Status status) {
    Messages& m = messages();
    if (m.status.ok()) m.status = std::move(status);
  }
  bool failed() const { return messages_ && !messages_->status.ok(); }

  Group group_;
  CollectiveArgs args_;
  uint64_t base_tag_;

 private:
  // Shared with the completion callbacks, so a task given up on (a deadline passed) can be
  // destroyed while the channel still holds its callbacks.
  struct Record {
    bool completed = false;
    size_t received = 0;  // bytes that came (a receive)
    int member = 0;       // what it is, for waiting()
    uint32_t step = 0;
    bool receive = false;
    size_t pieces_left = 1;  // of a message split to fit the channel
  };
  struct Messages {
    int pending = 0, sends_pending = 0;
    Status status;  // the first failure
    // Per message posted, in posting order; the first few inline, since most calls post few
    // and this is allocated per call.
    size_t posted = 0;
    std::array<Record, 4> first;
    std::vector<Record> more;
    Record& at(size_t message) {
      return message < first.size() ? first[message] : more[message - first.size()];
    }
  };
  // Counts a message about to be posted in `pieces`; its index.
  size_t track(int member, uint32_t step, bool receive, size_t pieces);
  // Made at the first message (from the call memory): tasks that send none (the slot
  // algorithms) make none.
  Messages& messages() {
    if (!messages_) messages_ = std::allocate_shared<Messages>(CallAllocator<Messages>());
    return *messages_;
  }
  static inline const Status kNoFailure{};
  std::shared_ptr<Messages> messages_;
};

}  // namespace ibcoll::collectives
