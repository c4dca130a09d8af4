#include "collectives/task.h"

#include <string>

namespace ibcoll::collectives {

size_t CollectiveTask::track(int member, uint32_t step, bool receive) {
  Messages& m = messages();
  if (m.posted >= m.first.size()) m.more.emplace_back();
  m.at(m.posted) = {false, 0, member, step, receive};
  ++m.pending;
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
  const size_t index = track(member, step, false);
  group_.channel.send(group_.peers[static_cast<size_t>(member)], base_tag_ + step, data, bytes,
                      [m = messages_, index](const Status& s, size_t) {
                        --m->pending;
                        m->at(index).completed = true;
                        if (!s.ok() && m->status.ok()) m->status = s;
                      });
  return index;
}

size_t CollectiveTask::recv_from(int member, uint32_t step, void* data, size_t bytes, bool exact) {
  const size_t index = track(member, step, true);
  group_.channel.recv(group_.peers[static_cast<size_t>(member)], base_tag_ + step, data, bytes,
                      [m = messages_, bytes, index, exact](const Status& s, size_t got) {
                        --m->pending;
                        m->at(index) = {true, got};
                        if (!m->status.ok()) return;
                        if (!exact && (s.ok() || s.code() == Code::truncated)) return;
                        if (!s.ok()) {
                          m->status = s;
                        } else if (got != bytes) {
                          m->status = Status(Code::mismatch,
                                             "a peer sent " + std::to_string(got) +
                                                 " bytes where " + std::to_string(bytes) +
                                                 " were expected (different counts or types?)");
                        }
                      });
  return index;
}

}  // namespace ibcoll::collectives
