#include "collectives/slot_exchange.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace ibcoll::collectives {
namespace {

using Region = transport::shm::SlotRegion;
static_assert(Region::kSignatureWords == 4, "the packing below fills four words");

// Six fields in four words: collective, type and op are small.
std::array<uint64_t, Region::kSignatureWords> pack(const CallSignature& s) {
  const auto f = s.fields();
  return {f[0] | f[2] << 8 | f[3] << 16, f[1], f[4], f[5]};
}

std::array<uint64_t, CallSignature::kFields> unpack(const uint64_t* w) {
  return {w[0] & 0xff, w[1], (w[0] >> 8) & 0xff, (w[0] >> 16) & 0xff, w[2], w[3]};
}

}  // namespace

SlotExchange::SlotExchange(const Group& group, const CallSignature& mine, int source)
    : slots_(*group.slots),
      rank_(group.rank),
      size_(group.size()),
      sequence_(group.slot_sequence),
      signature_(pack(mine)),
      source_(source) {}

Region::Buffer& SlotExchange::buffer_of(int member, uint64_t sequence) const {
  return slots_.slot_of(member).buffers[sequence % Region::kBuffers];
}

bool SlotExchange::gone(int member) {
  waiting_on_ = member;
  Status trouble = slots_.trouble(member, ++idle_);
  if (trouble.ok()) return false;
  verdict_ = std::move(trouble);
  done_ = true;
  slots_.abandon(rank_, sequence_, verdict_);
  return true;
}

bool SlotExchange::all_published(uint64_t sequence) {
  waiting_for_ = sequence;
  for (; next_member_ < size_; ++next_member_) {
    if (Region::load(buffer_of(next_member_, sequence).ready) < sequence) return gone(next_member_);
  }
  next_member_ = 0;
  return true;
}

bool SlotExchange::verified_earlier_calls(uint64_t last) {
  if (slots_.unverified_calls == 0) return true;
  for (uint64_t call = last + 1 - std::min(last, SlotGroup::kRunAhead); call <= last; ++call) {
    SlotGroup::Unverified& earlier = slots_.unverified[call % SlotGroup::kRunAhead];
    if (earlier.call != call) continue;  // verified, or it saw every member
    if (!all_published(call)) return false;
    if (done_) return true;  // a member died
    if (!same_signatures(call, earlier.signature) && earlier_.ok()) {
      const uint64_t back = sequence_ - call;
      earlier_ = reported_later(
          back == 1 ? std::string("this rank's call before this one")
                    : "this rank's call " + std::to_string(back) + " calls before this one",
          mismatch_of(call, earlier.signature));
    }
    slots_.forget_unverified(call);
  }
  return true;
}

bool SlotExchange::advance(const void* data, size_t bytes) {
  if (done_) return true;
  if (!slots_.failure.ok()) {  // an earlier call gave up: this one's turn never comes
    verdict_ = slots_.failure;
    done_ = true;
    return true;
  }
  if (!published_) {
    // Calls in flight at once take their turns in order: publishing a call says that every
    // earlier call's buffers have been read.
    if (slots_.released + 1 != sequence_) {
      waiting_on_ = -1;
      return false;
    }
    // Our buffer last held call sequence - kBuffers, which a member has read all it reads of once
    // it has published the call after it, so once it has published call sequence - lag. And a
    // member publishes over our deferred comparisons, kRunAhead calls back at most, only after
    // this rank has published this call (2 lag <= kBuffers).
    constexpr uint64_t lag = SlotGroup::kRunAhead;
    static_assert(2 * lag <= Region::kBuffers && lag + 1 <= Region::kBuffers);
    waiting_for_ = sequence_ - lag;
    for (size_t m = 0; m < static_cast<size_t>(size_); ++m) {
      uint64_t& seen = slots_.seen_ready[m];
      if (static_cast<int>(m) == rank_ || seen + lag >= sequence_) continue;
      seen = Region::load(buffer_of(static_cast<int>(m), sequence_ - lag).ready);
      if (seen + lag < sequence_) return gone(static_cast<int>(m));
    }
    // Every member has published the call `lag` back, and none can publish over it before this
    // rank publishes: compare it now if it was left unverified (no wait).
    if (sequence_ > lag && !verified_earlier_calls(sequence_ - lag)) return false;
    if (done_) return true;
    Region::Buffer& mine = buffer_of(rank_);
    if (bytes > 0) std::memcpy(mine.data, data, bytes);
    std::memcpy(mine.signature, signature_.data(), sizeof(mine.signature));
    Region::store(mine.ready, sequence_);
    published_ = true;
  }
  if (source_ == kEveryMember) {
    if (!all_published(sequence_)) return false;
    if (done_) return true;
    // Every member has published this call, so every earlier one, and publishes over none of
    // them before this rank publishes again.
    verified_earlier_calls(sequence_ - 1);
    if (done_) return true;
    if (!same_signatures(sequence_, signature_)) verdict_ = mismatch_of(sequence_, signature_);
  } else {
    waiting_for_ = sequence_;
    std::optional<Status> call = published_by(source_);
    if (!call) return gone(source_);
    verdict_ = std::move(*call);
    // The others' signatures are compared in a later call (SlotGroup::unverified), unless this
    // one already failed.
    if (verdict_.ok()) slots_.leave_unverified(sequence_, signature_);
  }
  done_ = true;
  return true;
}

bool SlotExchange::same_signatures(uint64_t sequence, const Signature& mine, int only) const {
  const int first = only == kEveryMember ? 0 : only;
  const int end = only == kEveryMember ? size_ : only + 1;
  uint64_t differ = 0;
  for (int m = first; m < end; ++m) {
    if (m == rank_) continue;  // `mine`, and its line may be in the others' caches by now
    const uint64_t* theirs = buffer_of(m, sequence).signature;
    for (size_t w = 0; w < mine.size(); ++w)
      differ |= theirs[w] ^ mine[w];
  }
  return differ == 0;
}

Status SlotExchange::mismatch_of(uint64_t sequence, const Signature& mine, int only) const {
  const int first = only == kEveryMember ? 0 : only;
  const int end = only == kEveryMember ? size_ : only + 1;
  auto low = unpack(mine.data()), high = low;
  for (int m = first; m < end; ++m) {
    const auto theirs = unpack(buffer_of(m, sequence).signature);
    for (size_t i = 0; i < theirs.size(); ++i) {
      low[i] = std::min(low[i], theirs[i]);
      high[i] = std::max(high[i], theirs[i]);
    }
  }
  return compare_calls(low, high);
}

const std::byte* SlotExchange::data_of(int member) const {
  return buffer_of(member).data;
}

std::optional<Status> SlotExchange::published_by(int member) const {
  if (Region::load(buffer_of(member).ready) < sequence_) return std::nullopt;
  if (same_signatures(sequence_, signature_, member)) return Status{};
  return mismatch_of(sequence_, signature_, member);
}

void SlotExchange::release() {
  slots_.released = sequence_;
  released_ = true;
}

std::string SlotExchange::waiting() const {
  if (waiting_on_ < 0) return "this rank's earlier call on the communicator to end";
  return "rank " + std::to_string(waiting_on_) + " (pid " +
         std::to_string(slots_.pid_of(waiting_on_)) + ") to publish slot call " +
         std::to_string(waiting_for_) + (published_ ? "" : ", so that this call may publish");
}

void SlotExchange::abandon(const Status& why) {
  if (!released_) slots_.abandon(rank_, sequence_, why);
}

}  // namespace ibcoll::collectives
