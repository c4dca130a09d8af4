// Allreduce by recursive doubling: log2(p) exchange steps of the whole vector, each partner
// combining the lower member's data first, so every member computes the very same bits. With
// p not a power of two, the first 2·(p − 2^k) members pair up first: the even one hands its
// data to the odd one, sits out the doubling, and gets the result back at the end.
//
// Checked, it is also the call check: every message starts with the sender's running minimum
// of each call field and of its complement (CallSignature, 96 bytes), which receivers fold in,
// so after the last step every member knows whether all calls agreed, and the check costs no
// message of its own. Its messages use the check's steps (from kAlgorithmSteps up), so a member
// running the check alone (with no payload) and one running the checked allreduce still meet,
// and messages of a different length are taken, not refused: the fields say what differs.
#pragma once

#include <memory>

#include "collectives/call_check.h"

namespace ibcoll::collectives {

std::unique_ptr<CollectiveTask> make_recursive_doubling_allreduce(Group group, CollectiveArgs args,
                                                                  uint64_t base_tag);
std::unique_ptr<CollectiveTask> make_checked_recursive_doubling_allreduce(
    Group group, CollectiveArgs args, uint64_t base_tag, const CallSignature& signature);

}  // namespace ibcoll::collectives
