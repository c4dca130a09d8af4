// A verbs peer that breaks the wire protocol, in the VM: rank 1's real channel sends, and a fault
// injector between it and the provider (every ibv_post_send goes through the context's
// ops.post_send) rewrites what it posts. The receiver must fail that peer, say what was wrong,
// and end the receive waiting on it with that error, never drop its completion.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/verbs_endpoint.h"
#include "tests/support/exchange.h"
#include "tests/support/forked_ranks.h"
#include "transport/wire.h"

namespace ibcoll::testing {
namespace {

enum class Lie {
  new_message_midway,  // a part of an eager message sent as the start of a new one
  write_past_length,   // a rendezvous chunk preceded by one more byte under the same immediate
  short_part,          // a later part of an eager message that says one byte less remains
};

Lie lie;
int (*real_post_send)(ibv_qp*, ibv_send_wr*, ibv_send_wr**) = nullptr;

int lying_post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  for (ibv_send_wr* w = wr; w; w = w->next) {
    if (lie == Lie::new_message_midway && w->opcode == IBV_WR_SEND && w->num_sge == 1) {
      auto* header = reinterpret_cast<transport::wire::MessageHeader*>(w->sg_list[0].addr);
      if (header->type == transport::wire::Type::eager_more) {
        header->type = transport::wire::Type::eager;
      }
    } else if (lie == Lie::short_part && w->opcode == IBV_WR_SEND && w->num_sge == 1) {
      auto* header = reinterpret_cast<transport::wire::MessageHeader*>(w->sg_list[0].addr);
      if (header->type == transport::wire::Type::eager_more && header->more > 0) --header->more;
    } else if (lie == Lie::write_past_length && w->opcode == IBV_WR_RDMA_WRITE_WITH_IMM &&
               w->num_sge == 1) {
      ibv_sge one_byte = w->sg_list[0];
      one_byte.length = 1;
      ibv_send_wr extra = *w;  // unsignaled: the channel never hears of it
      extra.sg_list = &one_byte;
      extra.send_flags = 0;
      extra.next = nullptr;
      if (int rc = real_post_send(qp, &extra, bad)) return rc;
    }
  }
  return real_post_send(qp, wr, bad);
}

// Rank 1 lies to rank 0 in one message of `bytes`; rank 0's receive, posted before it comes,
// must fail naming rank 1 and `what`.
void expect_lie_caught(Lie how, size_t bytes, const std::string& what) {
  lie = how;
  RankOptions options;
  options.environment["IBCOLL_TIMEOUT"] = "20s";  // a receive left waiting fails, not hangs
  expect_all_ok(run_ranks(
      2,
      [&](int me, int) {
        runtime::VerbsEndpoint r;
        std::vector<std::byte> data(bytes, std::byte{7});
        Transfer t;
        if (me == 0) {
          r.channel().recv(1, 1, data.data(), data.size(), record(t));
          r.bootstrap().barrier("posted");
          r.wait([&] { return t.done; }, "the receive from the lying peer");
          RANK_CHECK(t.status.code() == Code::peer_failed &&
                         t.status.message().find("peer 1 " + what) != std::string::npos,
                     t.status.to_string());
        } else {
          ibv_context* context = r.channel().device().context();
          real_post_send = context->ops.post_send;
          context->ops.post_send = lying_post_send;
          r.bootstrap().barrier("posted");
          r.channel().send(0, 1, data.data(), data.size(), record(t));
          // Its send may end either way (or not at all, once rank 0 stops talking to it).
          const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(5);
          r.wait([&] { return t.done || std::chrono::steady_clock::now() > end; }, "the lie");
        }
        r.bootstrap().barrier("end");
        return 0;
      },
      options));
}

// An eager message in parts (20000 bytes go in three) whose second part claims to begin a new
// message: the receive that took the first part fails; it used to be left waiting, its
// completion dropped with the replaced message.
TEST(VerbsLyingPeer, ANewMessageBeforeTheLastEndedFailsItsReceive) {
  expect_lie_caught(Lie::new_message_midway, 20000, "began a message before finishing");
}

// An eager message in parts whose second part counts one byte less still to come than the
// message has left: the receive fails, where the part used to be dropped and the receive left
// waiting for the rest until its deadline.
TEST(VerbsLyingPeer, APartThatDisagreesWithItsMessageFailsItsReceive) {
  expect_lie_caught(Lie::short_part, 20000, "sent a part");
}

// A rendezvous (100000 bytes, one RDMA write with immediate) whose writes count one byte more
// than the receive: the receive fails, where the count went unchecked.
TEST(VerbsLyingPeer, WritesPastTheReceiveLengthFailIt) {
  expect_lie_caught(Lie::write_past_length, 100000, "wrote 100001 bytes into a receive of 100000");
}

}  // namespace
}  // namespace ibcoll::testing
