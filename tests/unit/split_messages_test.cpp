// Vectors longer than the channel's largest message (verbs: 4 GiB) travel as pieces of that
// size. Here two ranks run every message algorithm in one process over an in-process channel
// whose largest message is 1000 bytes and which refuses anything longer (as every channel
// does): each collective is right, and its messages were split.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "collectives/registry.h"
#include "transport/channel.h"

namespace ibcoll::collectives {
namespace {

constexpr size_t kLargest = 1000;

// The messages in flight between the two ends, and the longest one seen.
struct Wire {
  struct Message {
    int from;
    uint64_t tag;
    std::vector<std::byte> bytes;
  };
  std::deque<Message> to[2];
  size_t messages = 0, longest = 0;
};

class LoopChannel final : public transport::Channel {
 public:
  LoopChannel(Wire& wire, int rank) : wire_(wire), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return 2; }
  size_t max_message_size() const override { return kLargest; }

 private:  // reached through Channel::send and recv, which check the arguments
  void post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                 transport::Completion done) override {
    const auto* bytes = static_cast<const std::byte*>(buffer);
    wire_.to[peer].push_back({rank_, tag, {bytes, bytes + length}});
    ++wire_.messages;
    wire_.longest = std::max(wire_.longest, length);
    sent_.push_back({std::move(done), length});  // completions run from poll(), never here
  }
  void post_recv(int peer, uint64_t tag, void* buffer, size_t capacity,
                 transport::Completion done) override {
    posted_.push_back({peer, tag, static_cast<std::byte*>(buffer), capacity, std::move(done)});
  }

 public:
  // Each posted receive takes the oldest message from its peer with its tag.
  int poll() override {
    int events = 0;
    for (; !sent_.empty(); sent_.pop_front(), ++events)
      sent_.front().first(Status(), sent_.front().second);
    for (auto r = posted_.begin(); r != posted_.end();) {
      auto& incoming = wire_.to[rank_];
      auto m = std::find_if(incoming.begin(), incoming.end(), [&](const Wire::Message& x) {
        return x.from == r->peer && x.tag == r->tag;
      });
      if (m == incoming.end()) {
        ++r;
        continue;
      }
      const size_t got = std::min(m->bytes.size(), r->capacity);
      if (got) std::memcpy(r->buffer, m->bytes.data(), got);
      const Status status = receive_status(r->peer, m->bytes.size(), r->capacity);
      incoming.erase(m);
      auto done = std::move(r->done);
      r = posted_.erase(r);
      done(status, got);
      ++events;
    }
    return events;
  }
  void cancel(uint64_t, uint64_t) override {}
  const Status* peer_failure(int) const override { return nullptr; }
  void tell(int, const transport::Notice&) override {}
  void tell_peers(const transport::Notice&) override {}

 private:
  struct Posted {
    int peer;
    uint64_t tag;
    std::byte* buffer;
    size_t capacity;
    transport::Completion done;
  };
  Wire& wire_;
  int rank_;
  std::deque<Posted> posted_;
  std::deque<std::pair<transport::Completion, size_t>> sent_;
};

// Runs `algorithm` on both ranks with `args_of(rank)` to the end.
void run_pair(const Algorithm& algorithm, Wire& wire,
              const std::function<CollectiveArgs(int)>& args_of) {
  LoopChannel channels[2] = {{wire, 0}, {wire, 1}};
  const int peers[2] = {0, 1};
  std::unique_ptr<CollectiveTask> tasks[2];
  for (int r = 0; r < 2; ++r) {
    tasks[r] = algorithm.make(Group{channels[r], r, peers}, args_of(r), 1 << 20);
    tasks[r]->start();
  }
  CollectiveTask::State states[2] = {CollectiveTask::State::running,
                                     CollectiveTask::State::running};
  for (int round = 0; round < 100000; ++round) {
    for (int r = 0; r < 2; ++r) {
      channels[r].poll();
      if (states[r] == CollectiveTask::State::running) states[r] = tasks[r]->advance();
    }
    if (states[0] != CollectiveTask::State::running &&
        states[1] != CollectiveTask::State::running) {
      break;
    }
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(states[r], CollectiveTask::State::done)
        << algorithm.name << ", rank " << r << ": " << tasks[r]->status().message();
  }
}

// Algorithms that move the vector in messages on one node (the slot ones use no messages;
// the hierarchical ones run these).
std::vector<const Algorithm*> message_algorithms(Collective collective) {
  std::vector<const Algorithm*> out;
  for (const Algorithm& a : algorithms())
    if (a.collective == collective && !a.uses_slots && !a.across_nodes) out.push_back(&a);
  return out;
}

TEST(SplitMessages, AllreduceLongerThanTheLargestMessage) {
  constexpr size_t kCount = 3 * kLargest / 4 * 4 + 3;  // floats: about 12 messages' worth
  for (const Algorithm* a : message_algorithms(Collective::allreduce)) {
    SCOPED_TRACE(a->name);
    Wire wire;
    std::vector<float> in[2], out[2];
    for (int r = 0; r < 2; ++r) {
      in[r].resize(kCount);
      std::iota(in[r].begin(), in[r].end(), static_cast<float>(r));
      out[r].assign(kCount, -1.0f);
    }
    run_pair(*a, wire, [&](int r) {
      return CollectiveArgs{in[r].data(), out[r].data(), kCount, DataType::float32, ReduceOp::sum};
    });
    for (int r = 0; r < 2; ++r)
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_EQ(out[r][i], in[0][i] + in[1][i]) << "rank " << r << ", element " << i;
    EXPECT_LE(wire.longest, kLargest);
    EXPECT_GT(wire.messages, 4u);
  }
}

TEST(SplitMessages, BcastLongerThanTheLargestMessage) {
  constexpr size_t kBytes = 5 * kLargest + 17;
  for (const Algorithm* a : message_algorithms(Collective::bcast)) {
    for (int root : {0, 1}) {
      SCOPED_TRACE(std::string(a->name) + ", root " + std::to_string(root));
      Wire wire;
      std::vector<uint8_t> data[2];
      for (int r = 0; r < 2; ++r)
        data[r].assign(kBytes, r == root ? 0 : 0xEE);
      for (size_t i = 0; i < kBytes; ++i)
        data[root][i] = static_cast<uint8_t>(i * 7);
      run_pair(*a, wire, [&](int r) {
        CollectiveArgs args{data[r].data(), data[r].data(), kBytes, DataType::uint8};
        args.root = root;
        return args;
      });
      EXPECT_EQ(data[0], data[1]);
      EXPECT_LE(wire.longest, kLargest);
      EXPECT_GE(wire.messages, kBytes / kLargest + 1);
    }
  }
}

}  // namespace
}  // namespace ibcoll::collectives
