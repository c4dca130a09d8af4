// The attributes ibcoll gives when it connects a QP, per type, against the kernel's table of
// what each transition requires and allows (ib_modify_qp_is_ok, drivers/infiniband/core/
// verbs.c): the kernel refuses a mask short of the required attributes or with one it does not
// allow. XRC INI and TGT cannot be tried here (Soft-RoCE has no XRC), so this is their check.
#include <gtest/gtest.h>

#include "transport/verbs/queue_pair.h"

namespace ibcoll::transport::verbs {
namespace {

struct Allowed {
  int required, optional;
};

void expect_allowed(int mask, Allowed allowed, const char* what) {
  EXPECT_EQ(mask & allowed.required, allowed.required)
      << what << ": a required attribute is missing";
  EXPECT_EQ(mask & ~(allowed.required | allowed.optional | IBV_QP_STATE), 0)
      << what << ": an attribute the kernel does not allow";
}

TEST(ConnectMasks, EachQpTypeGetsWhatTheKernelRequiresAndAllows) {
  const int rtr_base = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
  const int rtr_optional = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
  const int rtr_responder = rtr_base | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
  const int rts_requester = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                            IBV_QP_MAX_QP_RD_ATOMIC;
  const int rts_optional =
      IBV_QP_CUR_STATE | IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PATH_MIG_STATE;

  const ConnectMasks rc = connect_masks(IBV_QPT_RC);
  expect_allowed(rc.rtr, {rtr_responder, rtr_optional}, "RC to RTR");
  expect_allowed(rc.rts, {rts_requester, rts_optional | IBV_QP_MIN_RNR_TIMER}, "RC to RTS");

  const ConnectMasks ini = connect_masks(IBV_QPT_XRC_SEND);
  expect_allowed(ini.rtr, {rtr_base, rtr_optional}, "XRC INI to RTR");
  expect_allowed(ini.rts, {rts_requester, rts_optional}, "XRC INI to RTS");

  const ConnectMasks tgt = connect_masks(IBV_QPT_XRC_RECV);
  expect_allowed(tgt.rtr, {rtr_responder, rtr_optional}, "XRC TGT to RTR");
  expect_allowed(tgt.rts, {IBV_QP_TIMEOUT | IBV_QP_SQ_PSN, rts_optional | IBV_QP_MIN_RNR_TIMER},
                 "XRC TGT to RTS");
}

}  // namespace
}  // namespace ibcoll::transport::verbs
