#include "collectives/task.h"

#include <string>

namespace ibcoll::collectives {

void CollectiveTask::send_to(int member, uint32_t step, const void* data, size_t bytes) {
  ++messages_->pending;
  group_.channel.send(group_.peers[static_cast<size_t>(member)], base_tag_ + step, data, bytes,
                      [m = messages_](const Status& s, size_t) {
                        --m->pending;
                        if (!s.ok() && m->status.ok()) m->status = s;
                      });
}

void CollectiveTask::recv_from(int member, uint32_t step, void* data, size_t bytes) {
  ++messages_->pending;
  group_.channel.recv(group_.peers[static_cast<size_t>(member)], base_tag_ + step, data, bytes,
                      [m = messages_, bytes](const Status& s, size_t got) {
                        --m->pending;
                        if (!m->status.ok()) return;
                        if (!s.ok()) {
                          m->status = s;
                        } else if (got != bytes) {
                          m->status = Status(Code::mismatch,
                                             "a peer sent " + std::to_string(got) +
                                                 " bytes where " + std::to_string(bytes) +
                                                 " were expected (different counts or types?)");
                        }
                      });
}

Status run_to_completion(CollectiveTask& task, transport::ProgressEngine& engine,
                         std::chrono::milliseconds budget) {
  task.start();
  CollectiveTask::State state = task.advance();
  engine.wait(
      [&] {
        if (state == CollectiveTask::State::running) state = task.advance();
        return state != CollectiveTask::State::running;
      },
      budget, "collective");
  return task.status();
}

}  // namespace ibcoll::collectives
