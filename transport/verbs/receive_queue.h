// SharedReceiveQueue: the one SRQ of a process (basic, or XRC when the domain has it) with its
// slab of registered receive buffers. Consumed buffers are released back and reposted at the
// end of each poll that consumed any (before their credits go back); the SRQ limit event is
// armed as a backstop for a poll loop that falls behind.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "transport/verbs/handles.h"

namespace ibcoll::transport::verbs {

class SharedReceiveQueue {
 public:
  // `xrcd` and `cq` are given for an XRC SRQ, null for a basic one.
  SharedReceiveQueue(ibv_context* context, ibv_pd* pd, uint32_t depth, size_t buffer_size,
                     ibv_xrcd* xrcd, ibv_cq* cq);
  ~SharedReceiveQueue();
  SharedReceiveQueue(const SharedReceiveQueue&) = delete;
  SharedReceiveQueue& operator=(const SharedReceiveQueue&) = delete;

  ibv_srq* get() const { return srq_; }
  uint32_t depth() const { return depth_; }  // as granted by the provider
  uint32_t srq_num() const;                  // XRC addressing
  size_t buffer_size() const { return buffer_size_; }
  uint32_t posted() const { return posted_; }
  uint64_t limit_events() const { return limit_events_; }

  std::byte* buffer(uint32_t index) { return slab_.get() + size_t{index} * buffer_size_; }
  // A completion consumed buffer `index`; it stays owned by the caller until release().
  void consumed() { --posted_; }
  void release(uint32_t index) { released_.push_back(index); }
  // Reposts the released buffers, in one chain.
  int refill();
  // IBV_EVENT_SRQ_LIMIT_REACHED arrived: refill now and arm again.
  void on_limit_reached();

 private:
  void arm_limit();
  void destroy_srq();

  ibv_srq* srq_ = nullptr;
  uint32_t depth_ = 0;
  size_t buffer_size_ = 0;
  std::unique_ptr<std::byte[], void (*)(std::byte*)> slab_{nullptr, nullptr};
  MemoryRegion mr_;
  std::vector<uint32_t> released_;
  std::vector<ibv_recv_wr> wrs_;
  std::vector<ibv_sge> sges_;
  uint32_t posted_ = 0;
  uint64_t limit_events_ = 0;
};

}  // namespace ibcoll::transport::verbs
