#include "collectives/bcast/light.h"

#include <cstring>

#include "collectives/allreduce/folding.h"
#include "collectives/check_fields.h"
#include "collectives/probe_desk.h"
#include "collectives/scratch.h"
#include "collectives/tags.h"

namespace ibcoll::collectives {
namespace {

// The checked doubling exchange's steps (doubling_exchange.cpp): 0 folds in, 1 + log2(mask)
// doubles, 63 hands the result back to a member that sat out.
constexpr uint32_t kFoldStep = 0, kFinalStep = 63;
uint32_t doubling_step(int mask) {
  return 1 + static_cast<uint32_t>(__builtin_ctz(static_cast<unsigned>(mask)));
}

class LightBcast final : public CollectiveTask {
 public:
  LightBcast(Group group, CollectiveArgs args, uint64_t base_tag, const CallSignature& signature)
      : CollectiveTask(std::move(group), args, base_tag),
        fields_(signature),
        payload_bytes_(args.count * type_size(args.type)) {}

  void start() override {
    const int me = group_.rank, root = args_.root;
    // The tree: the root; past the fold, the doubling member in its place; then each member
    // takes the vector from the partner across the lowest bit in which its virtual rank differs
    // from that one's, and passes it on across the bits below it, highest first. So the
    // partners across the highest bits (other nodes, where nodes hold consecutive ranks) are
    // sent to first, once each: a node's members get it from one message into the node.
    const int doubling_root = folding_.sits_out(root) ? root + 1 : root;
    const int virtual_root = folding_.virtual_rank(doubling_root);
    const size_t message = CheckFields::kFullBytes + payload_bytes_;
    buffers_.allocate(2 * message);
    if (me == root) {
      have_ = true;
      return forward(static_cast<const std::byte*>(args_.recv));
    }
    if (folding_.sits_out(me)) {
      parent_ = me + 1, parent_step_ = kFinalStep;
    } else if (me == doubling_root) {
      parent_ = root, parent_step_ = kFoldStep;  // the root sat out and handed it in
    } else {
      const int distance = folding_.virtual_rank(me) ^ virtual_root;
      const int mask = distance & -distance;
      parent_ = folding_.member_of(folding_.virtual_rank(me) ^ mask);
      parent_step_ = doubling_step(mask);
      below_ = mask;
    }
    receive_ = recv_from(parent_, kAlgorithmSteps + parent_step_, incoming(), message, false);
    receiving_ = true;
  }

  State advance() override {
    if (!step_done()) {
      if (receiving_ && group_.probes && !completed(receive_)) {
        if (Status answer =
                group_.probes->wait_on(timer_, parent_, sequence_of(base_tag_), fields_);
            !answer.ok()) {
          fail(std::move(answer));
          return State::failed;
        }
      }
      return State::running;
    }
    if (failed()) return State::failed;
    if (receiving_) {
      receiving_ = false;
      const size_t bytes = received(receive_), fields = fields_.fold(incoming(), bytes);
      if (fields == 0) differs_ = true;
      have_ = fields != 0 && bytes == fields + payload_bytes_;
      forward(incoming() + fields);
      if (!step_done()) return State::running;
    }
    return finish();
  }

 private:
  std::byte* incoming() const { return buffers_.data(); }

  // Sends what this member has (its fields, the vector if it came) to the partners that have
  // not: those across the bits below the one it received across, and a neighbour that sat out.
  void forward(const std::byte* vector) {
    const int me = group_.rank;
    std::byte* outgoing = incoming() + CheckFields::kFullBytes + payload_bytes_;
    size_t bytes = fields_.write(outgoing);
    if (have_) {
      if (payload_bytes_ > 0) std::memcpy(outgoing + bytes, vector, payload_bytes_);
      if (me != args_.root) vector_ = outgoing + bytes;
      bytes += payload_bytes_;
    }
    auto send = [&](int member, uint32_t step) {
      send_to(member, kAlgorithmSteps + step, outgoing, bytes);
    };
    if (folding_.sits_out(me)) {  // the root, sitting out: its neighbour doubles in its place
      if (me == args_.root) send(me + 1, kFoldStep);
      return;
    }
    const int v = folding_.virtual_rank(me);
    for (int mask = below_ >> 1; mask > 0; mask >>= 1)
      send(folding_.member_of(v ^ mask), doubling_step(mask));
    if (folding_.paired(me) && me - 1 != args_.root) send(me - 1, kFinalStep);
  }

  State finish() {
    Status verdict = fields_.verdict(differs_);
    if (verdict.ok() && !have_)
      verdict = Status(Code::internal, "bcast: the root's vector never came");
    if (verdict.ok()) {
      if (vector_ && payload_bytes_ > 0) std::memcpy(args_.recv, vector_, payload_bytes_);
      return State::done;
    }
    if (group_.probes) group_.probes->ended(sequence_of(base_tag_), verdict, fields_);
    fail(std::move(verdict));
    return State::failed;
  }

  Folding folding_{group_.size()};
  CheckFields fields_;
  const size_t payload_bytes_;
  Scratch buffers_;  // a message in, then the message out
  int parent_ = -1;
  int below_ = folding_.pof2;  // it sends across the bits below this one
  uint32_t parent_step_ = 0;
  size_t receive_ = 0;
  bool receiving_ = false, have_ = false, differs_ = false;
  const std::byte* vector_ = nullptr;  // a receiver's copy of the vector, in the outgoing message
  ProbeDesk::Timer timer_;
};

}  // namespace

std::unique_ptr<CollectiveTask> make_light_bcast(Group group, CollectiveArgs args,
                                                 uint64_t base_tag,
                                                 const CallSignature& signature) {
  return std::make_unique<LightBcast>(std::move(group), args, base_tag, signature);
}

}  // namespace ibcoll::collectives
