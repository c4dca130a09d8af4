#include "collectives/doubling_exchange.h"

#include <algorithm>
#include <cstring>

#include "collectives/tags.h"

namespace ibcoll::collectives {

DoublingExchange::DoublingExchange(Group group, CollectiveArgs args, uint64_t base_tag,
                                   std::optional<CallSignature> signature, size_t payload_bytes)
    : CollectiveTask(std::move(group), args, base_tag), payload_bytes_(payload_bytes) {
  if (!signature) return;
  checked_ = true;
  fields_ = CheckFields(*signature);
}

void DoublingExchange::start() {
  begin();
  header_ = checked_ ? CheckFields::kFullBytes : 0;
  virtual_rank_ = folding_.virtual_rank(group_.rank);
  if (checked_ && needs_nothing_received()) return post_everything();
  // One allocation: what comes in, then (checked) what goes out.
  buffers_.allocate((checked_ ? 2 : 1) * (header_ + payload_bytes_));
  const int me = group_.rank;
  if (folding_.sits_out(me)) {  // hand the payload to the odd neighbour, wait for the result
    send(me + 1, 0);
    phase_ = Phase::folded_out;
  } else if (folding_.paired(me)) {
    receive(me - 1, 0);
    phase_ = Phase::folding_in;
  } else {
    begin_doubling();
  }
}

DoublingExchange::State DoublingExchange::advance() {
  while (true) {
    if (!step_done()) {
      // Only while the receive waits: a member waiting on its own sends is needed by others.
      if (awaited_ < 0 || !group_.probes || completed(last_receive_)) return State::running;
      Status answer = group_.probes->wait_on(timer_, awaited_, sequence_of(base_tag_), fields_);
      if (answer.ok()) return State::running;
      fail(std::move(answer));
      return State::failed;
    }
    if (failed()) return State::failed;
    switch (phase_) {
      case Phase::folding_in:
        take(group_.rank - 1, false);
        begin_doubling();
        break;
      case Phase::folded_out:
        receive(group_.rank + 1, kFinalStep);
        phase_ = Phase::unfolding;
        break;
      case Phase::doubling:
        take(folding_.member_of(virtual_rank_ ^ mask_), false);
        mask_ <<= 1;
        if (mask_ < folding_.pof2) {
          exchange();
        } else if (folding_.paired(group_.rank)) {  // give the even neighbour the result
          send(group_.rank - 1, kFinalStep);
          phase_ = Phase::unfolding;
        } else {
          return finish();
        }
        break;
      case Phase::unfolding:
        if (folding_.sits_out(group_.rank)) take(group_.rank + 1, true);
        return finish();
      case Phase::posted_all:
        for (int i = 0; i < fields_posted_; ++i) {
          const std::byte* room = fields_room_ + static_cast<size_t>(i) * header_;
          if (!fields_.fold(room, received(fields_receives_[i]))) mark_differs();
        }
        return finish();
    }
  }
}

// The same (member, step) messages as the steps below would post one by one, all now: one
// outgoing copy (after the receives' indices and room) serves every send, and each receive
// takes the fields alone (a longer message is cut short, which a receive that is not exact
// accepts).
void DoublingExchange::post_everything() {
  const int me = group_.rank;
  const int steps = __builtin_ctz(static_cast<unsigned>(folding_.pof2));
  const auto receives =
      static_cast<size_t>(folding_.sits_out(me) ? 1 : steps + (folding_.paired(me) ? 1 : 0));
  buffers_.allocate(receives * (sizeof(size_t) + header_) + header_ + payload_bytes_);
  fields_receives_ = reinterpret_cast<size_t*>(buffers_.data());
  fields_room_ = buffers_.data() + receives * sizeof(size_t);
  std::byte* outgoing = fields_room_ + receives * header_;
  const size_t outgoing_bytes = compose(outgoing, payload());
  phase_ = Phase::posted_all;
  auto post_send = [&](int member, uint32_t s) {
    send_to(member, step(s), outgoing, outgoing_bytes);
  };
  // What a member sends: its fields, and in the last step of a folded pair the payload too.
  auto post_receive = [&](int member, uint32_t s) {
    std::byte* room = fields_room_ + static_cast<size_t>(fields_posted_) * header_;
    const size_t sent = header_ + (s == kFinalStep ? payload_bytes_ : 0);
    receives_unaided_ = receives_unaided_ &&
                        group_.channel.unaided(group_.peers[static_cast<size_t>(member)], sent);
    fields_receives_[fields_posted_++] = recv_from(member, step(s), room, header_, false);
  };
  if (folding_.sits_out(me)) {
    post_send(me + 1, 0);
    post_receive(me + 1, kFinalStep);
    return;
  }
  if (folding_.paired(me)) post_receive(me - 1, 0);
  for (int mask = 1; mask < folding_.pof2; mask <<= 1) {
    const int partner = folding_.member_of(virtual_rank_ ^ mask);
    const auto s = static_cast<uint32_t>(1 + __builtin_ctz(static_cast<unsigned>(mask)));
    post_send(partner, s);
    post_receive(partner, s);
  }
  if (folding_.paired(me)) post_send(me - 1, kFinalStep);
}

uint32_t DoublingExchange::step(uint32_t s) const {
  return (checked_ ? kAlgorithmSteps : 0) + s;
}

void DoublingExchange::begin_doubling() {
  mask_ = 1;
  if (folding_.pof2 == 1) {  // alone: nothing to exchange
    phase_ = Phase::unfolding;
    return;
  }
  phase_ = Phase::doubling;
  exchange();
}

void DoublingExchange::exchange() {
  const int partner = folding_.member_of(virtual_rank_ ^ mask_);
  const auto s = static_cast<uint32_t>(1 + __builtin_ctz(static_cast<unsigned>(mask_)));
  send(partner, s);
  receive(partner, s);
}

// Unchecked, straight from the payload; checked, the fields go first.
void DoublingExchange::send(int member, uint32_t s) {
  const std::span<const std::byte> data = payload();
  if (!checked_) {
    send_to(member, step(s), data.data(), data.size());
    return;
  }
  std::byte* outgoing = incoming() + header_ + payload_bytes_;
  send_to(member, step(s), outgoing, compose(outgoing, data));
}

size_t DoublingExchange::compose(std::byte* outgoing, std::span<const std::byte> data) const {
  const size_t fields = fields_.write(outgoing);
  if (!data.empty()) std::memcpy(outgoing + fields, data.data(), data.size());
  return fields + data.size();
}

void DoublingExchange::receive(int member, uint32_t s) {
  const size_t bytes = header_ + payload_bytes_;
  if (checked_) {
    awaited_ = member;
    timer_ = {};  // a wait of its own
  }
  last_receive_ = checked_ ? recv_from(member, step(s), incoming(), bytes, false)
                           : recv_from(member, step(s), incoming(), bytes);
}

// Folds in what `other` sent: its fields always, its payload if it had this call's length.
void DoublingExchange::take(int other, bool last) {
  std::byte* payload = incoming();
  if (checked_) {
    const size_t bytes = received(last_receive_), fields = fields_.fold(incoming(), bytes);
    if (!fields) mark_differs();
    payload = fields && bytes == fields + payload_bytes_ ? incoming() + fields : nullptr;
  }
  absorb(other, payload, last);
}

DoublingExchange::State DoublingExchange::finish() {
  Status verdict = checked_ ? fields_.verdict(differs_) : Status{};
  if (verdict.ok()) verdict = finish_payload();
  if (verdict.ok()) return State::done;
  if (group_.probes) group_.probes->ended(sequence_of(base_tag_), verdict, fields_);
  fail(std::move(verdict));
  return State::failed;
}

}  // namespace ibcoll::collectives
