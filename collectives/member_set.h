// MemberSet: a set of a communicator's member indices, as a bitmap of 64 members a word: an
// agreement's view of which members failed, and the failed set it decides. Its size is the
// members' count over 8 bytes whatever it holds (1 KiB at 8192 members): the least that holds
// any set, since nothing says a job's failures are few.
#pragma once

#include <bit>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace ibcoll::collectives {

class MemberSet {
 public:
  static constexpr size_t words_for(int members) {
    return (static_cast<size_t>(members) + 63) / 64;
  }

  explicit MemberSet(int members = 0) : members_(members), words_(words_for(members)) {}
  // The set whose bitmap is `words`, or null when they do not fit `members` (a word too many or
  // too few, a bit at or past `members`).
  static std::optional<MemberSet> from_words(std::span<const uint64_t> words, int members) {
    if (members < 0 || words.size() != words_for(members)) return std::nullopt;
    if (members % 64 != 0 && !words.empty() && words.back() >> (members % 64) != 0)
      return std::nullopt;
    MemberSet set(members);
    set.words_.assign(words.begin(), words.end());
    for (uint64_t w : set.words_)
      set.count_ += std::popcount(w);
    return set;
  }

  int members() const { return members_; }
  const std::vector<uint64_t>& words() const { return words_; }
  int count() const { return count_; }
  bool contains(int member) const { return words_[word(member)] >> (member % 64) & 1; }
  void add(int member) {
    if (contains(member)) return;
    words_[word(member)] |= uint64_t{1} << (member % 64);
    ++count_;
  }
  bool operator==(const MemberSet& other) const {
    return members_ == other.members_ && words_ == other.words_;
  }

  // The members in the set, in order.
  std::vector<int> list() const {
    std::vector<int> in;
    for (size_t w = 0; w < words_.size(); ++w) {
      for (uint64_t bits = words_[w]; bits != 0; bits &= bits - 1)
        in.push_back(static_cast<int>(w * 64) + std::countr_zero(bits));
    }
    return in;
  }
  // The members outside it (the living, for a failed set): how many, how many come before
  // `member`, and the one at `position` among them (-1 past the last).
  int outside_count() const { return members_ - count_; }
  int outside_before(int member) const {
    int inside = 0;
    for (size_t w = 0; w < word(member); ++w)
      inside += std::popcount(words_[w]);
    const uint64_t below = (uint64_t{1} << (member % 64)) - 1;
    inside += std::popcount(words_[word(member)] & below);
    return member - inside;
  }
  int outside_at(int position) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      const int base = static_cast<int>(w * 64);
      const int here = std::min(64, members_ - base) - std::popcount(words_[w]);
      if (position < here) {
        for (uint64_t free = ~words_[w]; free != 0; free &= free - 1) {
          if (position-- == 0) return base + std::countr_zero(free);
        }
      }
      position -= here;
    }
    return -1;
  }

 private:
  static size_t word(int member) { return static_cast<size_t>(member) / 64; }

  int members_;
  std::vector<uint64_t> words_;
  int count_ = 0;
};

}  // namespace ibcoll::collectives
