#include "collectives/agreement_message.h"

#include <cstring>

namespace ibcoll::collectives {
namespace {

constexpr uint32_t kMagic = 0x47414249;  // "IBAG"

// The fixed part, then the sender's view; up: its fold; then the decision's values and failed
// members, where there is one (always, down).
struct Header {
  uint32_t magic;
  uint8_t kind;
  uint8_t fold;
  uint8_t has_decision;
  uint8_t zero;
  uint32_t instance;
  uint32_t members;
  uint32_t value_words;
  uint32_t zero_too;
  uint64_t key;
};
static_assert(sizeof(Header) == 32);

size_t words_in(const Header& h) {
  const size_t set = MemberSet::words_for(static_cast<int>(h.members));
  const bool up = h.kind == static_cast<uint8_t>(AgreementMessage::Kind::up);
  return set + (up ? h.value_words : 0) + (h.has_decision ? h.value_words + set : 0);
}

class Writer {
 public:
  explicit Writer(size_t bytes) : bytes_(bytes) {}
  void put(const void* data, size_t length) {
    if (length == 0) return;  // no values: their vector may hold no storage at all
    std::memcpy(bytes_.data() + at_, data, length);
    at_ += length;
  }
  void words(const std::vector<uint64_t>& w) { put(w.data(), w.size() * sizeof(uint64_t)); }
  std::vector<std::byte> done() { return std::move(bytes_); }

 private:
  std::vector<std::byte> bytes_;
  size_t at_ = 0;
};

std::vector<uint64_t> take_words(std::span<const std::byte>& bytes, size_t count) {
  std::vector<uint64_t> w(count);
  if (count > 0) std::memcpy(w.data(), bytes.data(), count * sizeof(uint64_t));
  bytes = bytes.subspan(count * sizeof(uint64_t));
  return w;
}

}  // namespace

size_t agreement_message_bytes(int members, uint32_t value_words) {
  return sizeof(Header) + (2 * MemberSet::words_for(members) + 2 * size_t{value_words}) * 8;
}

std::vector<std::byte> encode(const AgreementMessage& m) {
  const auto value_words =
      static_cast<uint32_t>(m.decision ? m.decision->values.size() : m.values.size());
  Header h{kMagic,
           static_cast<uint8_t>(m.kind),
           m.fold,
           static_cast<uint8_t>(m.decision ? 1 : 0),
           0,
           m.instance,
           static_cast<uint32_t>(m.view.members()),
           value_words,
           0,
           m.key};
  Writer out(sizeof(Header) + words_in(h) * sizeof(uint64_t));
  out.put(&h, sizeof(h));
  out.words(m.view.words());
  if (m.kind == AgreementMessage::Kind::up) out.words(m.values);
  if (m.decision) {
    out.words(m.decision->values);
    out.words(m.decision->failed.words());
  }
  return out.done();
}

std::optional<AgreementMessage> decode_agreement(std::span<const std::byte> bytes, int members) {
  Header h;
  if (bytes.size() < sizeof(h)) return std::nullopt;
  std::memcpy(&h, bytes.data(), sizeof(h));
  bytes = bytes.subspan(sizeof(h));
  const bool up = h.kind == static_cast<uint8_t>(AgreementMessage::Kind::up);
  const bool down = h.kind == static_cast<uint8_t>(AgreementMessage::Kind::down);
  if (h.magic != kMagic || (!up && !down) || h.has_decision > 1 || (down && !h.has_decision) ||
      h.zero != 0 || h.zero_too != 0 || h.members != static_cast<uint32_t>(members) ||
      h.value_words > kMostAgreementValues || bytes.size() != words_in(h) * sizeof(uint64_t)) {
    return std::nullopt;
  }
  AgreementMessage m;
  m.kind = static_cast<AgreementMessage::Kind>(h.kind);
  m.fold = h.fold;
  m.key = h.key;
  m.instance = h.instance;
  const size_t set_words = MemberSet::words_for(members);
  std::optional<MemberSet> view = MemberSet::from_words(take_words(bytes, set_words), members);
  if (!view) return std::nullopt;
  m.view = std::move(*view);
  if (up) m.values = take_words(bytes, h.value_words);
  if (h.has_decision) {
    std::vector<uint64_t> values = take_words(bytes, h.value_words);
    std::optional<MemberSet> failed = MemberSet::from_words(take_words(bytes, set_words), members);
    if (!failed) return std::nullopt;
    m.decision = AgreementDecision{std::move(values), std::move(*failed)};
  }
  return m;
}

}  // namespace ibcoll::collectives
