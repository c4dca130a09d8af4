#include "collectives/task.h"

#include <algorithm>
#include <string>

namespace ibcoll::collectives {
namespace {

// How many pieces of the channel's `largest` message a message of `bytes` takes.
size_t pieces_of(size_t bytes, size_t largest) {
  return bytes <= largest ? 1 : (bytes + largest - 1) / largest;
}

}  // namespace

size_t CollectiveTask::track(int member, uint32_t step, bool receive, size_t pieces) {
  Messages& m = messages();
  if (m.posted >= m.first.size()) m.more.emplace_back();
  m.at(m.posted) = {false, 0, member, step, receive, pieces};
  ++m.pending;
  if (!receive) ++m.sends_pending;
  return m.posted++;
}

std::string CollectiveTask::waiting() const {
  constexpr int kNamed = 4;  // messages named; the rest counted
  std::string named;
  int listed = 0, others = 0;
  for (size_t i = 0; messages_ && i < messages_->posted; ++i) {
    const Record& r = messages_->at(i);
    if (r.completed) continue;
    if (listed == kNamed) {
      ++others;
      continue;
    }
    const int job_rank = group_.peers[static_cast<size_t>(r.member)];
    named += std::string(listed++ ? "; " : "") + (r.receive ? "a message from" : "its message to") +
             " rank " + std::to_string(r.member) + " (job rank " + std::to_string(job_rank) +
             ") in step " + std::to_string(r.step);
  }
  if (named.empty()) return "its next step";
  return named + (others > 0 ? "; and " + std::to_string(others) + " more messages" : "");
}

size_t CollectiveTask::send_to(int member, uint32_t step, const void* data, size_t bytes) {
  const size_t largest = group_.channel.max_message_size(), pieces = pieces_of(bytes, largest);
  const size_t index = track(member, step, false, pieces);
  for (size_t i = 0; i < pieces; ++i) {
    const size_t offset = i * largest;
    group_.channel.send(group_.peers[static_cast<size_t>(member)], base_tag_ + step,
                        static_cast<const std::byte*>(data) + offset,
                        std::min(largest, bytes - offset),
                        [m = messages_, index](const Status& s, size_t) {
                          Record& r = m->at(index);
                          if (--r.pieces_left == 0) {
                            --m->pending;
                            --m->sends_pending;
                            r.completed = true;
                          }
                          if (!s.ok() && m->status.ok()) m->status = s;
                        });
  }
  return index;
}

size_t CollectiveTask::recv_from(int member, uint32_t step, void* data, size_t bytes, bool exact) {
  const size_t largest = group_.channel.max_message_size(), pieces = pieces_of(bytes, largest);
  if (pieces > 1 && !exact) {
    throw Error(Code::internal, "a receive of any length cannot be split into pieces");
  }
  const size_t index = track(member, step, true, pieces);
  for (size_t i = 0; i < pieces; ++i) {
    const size_t offset = i * largest, expected = std::min(largest, bytes - offset);
    group_.channel.recv(group_.peers[static_cast<size_t>(member)], base_tag_ + step,
                        static_cast<std::byte*>(data) + offset, expected,
                        [m = messages_, expected, index, exact](const Status& s, size_t got) {
                          Record& r = m->at(index);
                          r.received += got;
                          if (--r.pieces_left == 0) {
                            --m->pending;
                            r.completed = true;
                          }
                          if (!m->status.ok()) return;
                          if (!exact && (s.ok() || s.code() == Code::truncated)) return;
                          if (!s.ok()) {
                            m->status = s;
                          } else if (got != expected) {
                            m->status = Status(Code::mismatch,
                                               "a peer sent " + std::to_string(got) +
                                                   " bytes where " + std::to_string(expected) +
                                                   " were expected (different counts or types?)");
                          }
                        });
  }
  return index;
}

}  // namespace ibcoll::collectives
