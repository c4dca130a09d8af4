#include "transport/verbs/completion_queue.h"

#include <fcntl.h>

#include <cerrno>
#include <string>

#include "base/status.h"
#include "transport/verbs/handles.h"

namespace ibcoll::transport::verbs {

CompletionQueue::CompletionQueue(ibv_context* context, int depth, bool with_channel) {
  if (with_channel) {
    channel_ = ibv_create_comp_channel(context);
    if (!channel_) throw_errno("ibv_create_comp_channel", errno);
    int flags = fcntl(channel_->fd, F_GETFL);
    fcntl(channel_->fd, F_SETFL, flags | O_NONBLOCK);  // arm() drains it without blocking
  }
  cq_ = ibv_create_cq(context, depth, nullptr, channel_, 0);
  if (!cq_) {
    int err = errno;
    if (channel_) ibv_destroy_comp_channel(channel_);
    throw_errno("ibv_create_cq of depth " + std::to_string(depth), err);
  }
  ++live_objects().cqs;
  if (cq_->cqe < depth) {  // read back: the provider may round up, never down
    const int granted = cq_->cqe;
    release();
    throw Error(Code::not_supported, "ibv_create_cq granted " + std::to_string(granted) +
                                         " entries, not the " + std::to_string(depth) +
                                         " asked for");
  }
}

CompletionQueue::~CompletionQueue() {
  release();
}

void CompletionQueue::release() {
  if (unacked_events_) ibv_ack_cq_events(cq_, unacked_events_);
  if (int rc = ibv_destroy_cq(cq_)) {
    report_destroy_failure("ibv_destroy_cq", rc);
  } else {
    --live_objects().cqs;
  }
  if (channel_) {
    if (int rc = ibv_destroy_comp_channel(channel_)) {
      report_destroy_failure("ibv_destroy_comp_channel", rc);
    }
  }
}

int CompletionQueue::arm() {
  if (!channel_) return -1;
  ibv_cq* event_cq = nullptr;
  void* event_context = nullptr;
  while (ibv_get_cq_event(channel_, &event_cq, &event_context) == 0)
    ++unacked_events_;
  if (unacked_events_ >= 64) {  // acknowledging takes a lock: batch it
    ibv_ack_cq_events(cq_, unacked_events_);
    unacked_events_ = 0;
  }
  if (int rc = ibv_req_notify_cq(cq_, 0)) throw_errno("ibv_req_notify_cq", rc);
  return channel_->fd;
}

}  // namespace ibcoll::transport::verbs
