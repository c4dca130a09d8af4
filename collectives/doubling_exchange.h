// DoublingExchange: recursive doubling's pattern of messages, shared by the allreduce that
// reduces along it and the checked bcast that spreads the root's vector along it. log2(p)
// steps in which members exchange with the partner whose virtual rank differs in one bit;
// with p not a power of two, the first 2·(p − 2^k) members pair up first (folding.h): the even
// one hands its payload to the odd one, sits out, and gets the final payload back at the end.
// The pairs depend on the group alone, never on the call.
//
// Checked, it is also the call check: every message starts with the sender's running minimum
// of each call field and of its complement (CheckFields: 24 bytes while the calls agree, 96
// once they differ), which receivers fold in, so after the last step every member knows whether
// all calls agreed, and the check costs no message of its own. Its messages use the check's steps
// (from kAlgorithmSteps up), so members running the check alone (no payload), a checked allreduce
// or a checked bcast all meet, and messages of another length are taken, not refused: the fields
// say what differs.
//
// A member whose payload is whole from the start and who needs nothing it receives (a bcast's
// root) posts all its messages at once, from one copy of its fields and payload: its caller may
// have the call back once they are sent (caller_done), while the receives of the others' fields
// finish the verdict; if those messages arrive without its help (Channel::unaided), so that no
// sender waits on it while it is away. Its messages carry its own fields, not a running minimum, so
// what passes through it is its call alone: every member still learns whether its call is the
// root's, but a member whose only path to another runs through the root does not learn that one's.
//
// Step by step, a checked member that waits long on a partner probes it (probe_desk.h): a light
// bcast's member (bcast/light.h) sends only where the vector goes, so a partner whose call was
// one may never send.
#pragma once

#include <array>
#include <optional>
#include <span>

#include "collectives/allreduce/folding.h"
#include "collectives/call_check.h"
#include "collectives/check_fields.h"
#include "collectives/probe_desk.h"
#include "collectives/scratch.h"

namespace ibcoll::collectives {

class DoublingExchange : public CollectiveTask {
 public:
  void start() override;
  State advance() override;
  bool caller_done() const override {
    return phase_ == Phase::posted_all && receives_unaided_ && sends_done() && !failed();
  }

 protected:
  // `payload_bytes`: the length of a payload in this call (what a member receives at most).
  DoublingExchange(Group group, CollectiveArgs args, uint64_t base_tag,
                   std::optional<CallSignature> signature, size_t payload_bytes);

  // Before the first message: set up what payload() returns.
  virtual void begin() = 0;
  // What this member sends now; empty sends the fields alone (checked only).
  virtual std::span<const std::byte> payload() const = 0;
  // `other` (a member) sent `incoming` (payload_bytes, which may be clobbered), or, checked,
  // a message of another length (null). `last`: the final step's, after this member sat out.
  virtual void absorb(int other, std::byte* incoming, bool last) = 0;
  // Once every step is done and the calls agree; a failure fails the call.
  virtual Status finish_payload() { return {}; }
  // Checked only: this member's payload is whole at begin() and nothing received changes it or
  // the caller's buffers, so it posts every message at once (absorb is never called).
  virtual bool needs_nothing_received() const { return false; }
  // A message came that the calls' fields alone cannot explain (calls agreed, lengths did not).
  void mark_differs() { differs_ = true; }

  const size_t payload_bytes_;

 private:
  enum class Phase { folding_in, folded_out, doubling, unfolding, posted_all };
  static constexpr uint32_t kFinalStep = 63;

  uint32_t step(uint32_t s) const;
  void post_everything();
  void begin_doubling();
  void exchange();
  void send(int member, uint32_t s);
  void receive(int member, uint32_t s);
  void take(int other, bool last);
  // Writes the fields and `data` to `outgoing`; the message's length.
  size_t compose(std::byte* outgoing, std::span<const std::byte> data) const;
  State finish();

  Folding folding_{group_.size()};
  bool checked_ = false, differs_ = false;
  CheckFields fields_;
  size_t header_ = 0;  // room for the fields at the start of a message: their longest form
  size_t last_receive_ = 0;
  // post_everything's receives (of fields alone): their message indices, then their room.
  int fields_posted_ = 0;
  size_t* fields_receives_ = nullptr;
  std::byte* fields_room_ = nullptr;
  bool receives_unaided_ = true;  // their messages need nothing of this rank (Channel::unaided)
  std::byte* incoming() const { return buffers_.data(); }
  Scratch buffers_;
  int virtual_rank_ = 0, mask_ = 1;
  int awaited_ = -1;  // the member of the receive under way (checked, step by step)
  ProbeDesk::Timer timer_;
  Phase phase_ = Phase::doubling;
};

}  // namespace ibcoll::collectives
