#include "collectives/task.h"

#include <string>

namespace ibcoll::collectives {

size_t CollectiveTask::track() {
  Messages& m = messages();
  if (m.posted >= m.first.size()) m.more.emplace_back();
  ++m.pending;
  return m.posted++;
}

size_t CollectiveTask::send_to(int member, uint32_t step, const void* data, size_t bytes) {
  const size_t index = track();
  group_.channel.send(group_.peers[static_cast<size_t>(member)], base_tag_ + step, data, bytes,
                      [m = messages_, index](const Status& s, size_t) {
                        --m->pending;
                        m->at(index).completed = true;
                        if (!s.ok() && m->status.ok()) m->status = s;
                      });
  return index;
}

size_t CollectiveTask::recv_from(int member, uint32_t step, void* data, size_t bytes, bool exact) {
  const size_t index = track();
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
