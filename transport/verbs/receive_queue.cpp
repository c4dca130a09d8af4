#include "transport/verbs/receive_queue.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "base/log.h"
#include "base/status.h"
#include "transport/verbs/work_id.h"

namespace ibcoll::transport::verbs {
namespace {
constexpr size_t kPage = 4096;
}  // namespace

SharedReceiveQueue::SharedReceiveQueue(ibv_context* context, ibv_pd* pd, uint32_t depth,
                                       size_t buffer_size, ibv_xrcd* xrcd, ibv_cq* cq) {
  ibv_srq_init_attr_ex init{};
  init.attr.max_wr = depth;
  init.attr.max_sge = 1;
  init.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  init.srq_type = IBV_SRQT_BASIC;
  init.pd = pd;
  if (xrcd) {
    init.srq_type = IBV_SRQT_XRC;
    init.xrcd = xrcd;
    init.cq = cq;
    init.comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  }
  srq_ = ibv_create_srq_ex(context, &init);
  if (!srq_) throw_errno("ibv_create_srq_ex of depth " + std::to_string(depth), errno);
  ++live_objects().srqs;
  if (init.attr.max_wr < depth) {  // read back: never assume the request was granted
    destroy_srq();
    throw Error(Code::not_supported, "the SRQ holds " + std::to_string(init.attr.max_wr) +
                                         " receives, not the " + std::to_string(depth) +
                                         " asked for (IBCOLL_SRQ_DEPTH)");
  }
  depth_ = depth;  // the provider may grant more; credits are computed from what we post
  buffer_size_ = (buffer_size + 63) / 64 * 64;

  const size_t bytes = (size_t{depth_} * buffer_size_ + kPage - 1) / kPage * kPage;
  auto* raw = static_cast<std::byte*>(std::aligned_alloc(kPage, bytes));
  if (!raw) {
    destroy_srq();
    throw Error(Code::system_error,
                "cannot allocate " + std::to_string(bytes) + " bytes of receive buffers");
  }
  slab_ = {raw, [](std::byte* p) { std::free(p); }};
  try {
    mr_ = register_memory(pd, raw, bytes, Access::device_writes);
    for (uint32_t i = 0; i < depth_; ++i)
      released_.push_back(i);
    refill();
    arm_limit();
  } catch (...) {
    destroy_srq();
    throw;
  }
}

SharedReceiveQueue::~SharedReceiveQueue() {
  // The SRQ goes first (its posted work requests point into the slab), then the MR, then the slab.
  destroy_srq();
}

void SharedReceiveQueue::destroy_srq() {
  if (int rc = ibv_destroy_srq(srq_)) {
    report_destroy_failure("ibv_destroy_srq", rc);
  } else {
    --live_objects().srqs;
  }
}

uint32_t SharedReceiveQueue::srq_num() const {
  uint32_t num = 0;
  if (int rc = ibv_get_srq_num(srq_, &num)) throw_errno("ibv_get_srq_num", rc);
  return num;
}

int SharedReceiveQueue::refill() {
  if (released_.empty()) return 0;
  wrs_.resize(released_.size());  // members, so a warm refill allocates nothing
  sges_.resize(released_.size());
  for (size_t i = 0; i < released_.size(); ++i) {
    sges_[i] = {reinterpret_cast<uint64_t>(buffer(released_[i])),
                static_cast<uint32_t>(buffer_size_), mr_->lkey};
    wrs_[i].wr_id = make_work_id(WorkKind::srq_receive, released_[i]);
    wrs_[i].sg_list = &sges_[i];
    wrs_[i].num_sge = 1;
    wrs_[i].next = i + 1 < wrs_.size() ? &wrs_[i + 1] : nullptr;
  }
  ibv_recv_wr* bad = nullptr;
  const int rc = ibv_post_srq_recv(srq_, wrs_.data(), &bad);
  // On failure the work requests before `bad` are posted: they leave the released list, or a
  // later refill would post their buffers twice.
  const size_t count = rc == 0 ? released_.size()
                       : bad   ? static_cast<size_t>(bad - wrs_.data())
                               : 0;
  posted_ += static_cast<uint32_t>(count);
  released_.erase(released_.begin(), released_.begin() + static_cast<std::ptrdiff_t>(count));
  if (rc != 0) throw_errno("ibv_post_srq_recv", rc);
  return static_cast<int>(count);
}

void SharedReceiveQueue::on_limit_reached() {
  ++limit_events_;
  IBCOLL_LOG(debug, "SRQ limit reached (" << posted_ << " of " << depth_ << " posted)");
  refill();
  arm_limit();
}

void SharedReceiveQueue::arm_limit() {
  ibv_srq_attr attr{};
  attr.srq_limit = std::max<uint32_t>(1, depth_ / 8);
  if (int rc = ibv_modify_srq(srq_, &attr, IBV_SRQ_LIMIT)) throw_errno("ibv_modify_srq(limit)", rc);
}

}  // namespace ibcoll::transport::verbs
