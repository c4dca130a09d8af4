// CompletionQueue: one CQ (and optionally a completion channel, so a waiter can sleep).
// The depth the provider actually gave is read back: it may exceed the request.
#pragma once

#include <infiniband/verbs.h>

namespace ibcoll::transport::verbs {

class CompletionQueue {
 public:
  CompletionQueue(ibv_context* context, int depth, bool with_channel);
  ~CompletionQueue();
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  ibv_cq* get() const { return cq_; }
  int depth() const { return cq_->cqe; }
  int poll(ibv_wc* completions, int max) { return ibv_poll_cq(cq_, max, completions); }

  // Requests a notification for the next completion and returns the fd that will become
  // readable, or -1 without a channel. Consumes (and acknowledges) notifications already there.
  int arm();

 private:
  void release();

  ibv_comp_channel* channel_ = nullptr;
  ibv_cq* cq_ = nullptr;
  unsigned unacked_events_ = 0;
};

}  // namespace ibcoll::transport::verbs
