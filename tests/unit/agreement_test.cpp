// The agreement's protocol (collectives/agreement.h) among members in one process, over a
// simulated network that delivers messages in an order drawn from a seed, kills members at
// drawn moments (mid-send: some of their messages delivered, some lost) and tells the others
// late and one at a time: whatever the order, every survivor decides, and all decide the same.
// Its messages are also parsed as the bytes of another process are (MemberSet, encode/decode).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <set>

#include "collectives/agreement.h"
#include "collectives/tags.h"
#include "transport/withdrawn_tags.h"

namespace ibcoll::collectives {
namespace {

TEST(MemberSet, CountsAndFindsTheMembersOutside) {
  MemberSet set(130);
  for (int m : {0, 5, 64, 65, 129})
    set.add(m);
  set.add(5);
  EXPECT_EQ(set.count(), 5);
  EXPECT_EQ(set.list(), (std::vector<int>{0, 5, 64, 65, 129}));
  EXPECT_EQ(set.outside_count(), 125);
  EXPECT_EQ(set.outside_before(6), 4);  // 1, 2, 3, 4
  EXPECT_EQ(set.outside_at(0), 1);
  EXPECT_EQ(set.outside_at(4), 6);
  EXPECT_EQ(set.outside_at(62), 66);  // 1-4, 6-63 are 62
  EXPECT_EQ(set.outside_at(124), 128);
  EXPECT_EQ(set.outside_at(125), -1);
  for (int p = 0; p < set.outside_count(); ++p)
    EXPECT_EQ(set.outside_before(set.outside_at(p)), p);
  EXPECT_FALSE(MemberSet::from_words(std::vector<uint64_t>{0, 0, uint64_t{1} << 2}, 130));
  EXPECT_FALSE(MemberSet::from_words(std::vector<uint64_t>{0, 0}, 130));
  EXPECT_TRUE(MemberSet::from_words(set.words(), 130) == set);
}

TEST(AgreementMessage, WhatParsesEncodesToTheSameBytes) {
  AgreementMessage up;
  up.kind = AgreementMessage::Kind::up;
  up.fold = 2;
  up.key = 0x123456789;
  up.instance = 7;
  up.view = MemberSet(70);
  up.view.add(69);
  up.values = {5, 6};
  const std::vector<std::byte> bytes = encode(up);
  EXPECT_EQ(bytes.size(), agreement_message_bytes(70, 2) - 16 - 16);  // no decision
  const std::optional<AgreementMessage> back = decode_agreement(bytes, 70);
  ASSERT_TRUE(back);
  EXPECT_EQ(encode(*back), bytes);
  EXPECT_FALSE(decode_agreement(bytes, 71));  // another communicator's size
  std::vector<std::byte> cut(bytes.begin(), bytes.end() - 1);
  EXPECT_FALSE(decode_agreement(cut, 70));
  AgreementMessage down = up;
  down.kind = AgreementMessage::Kind::down;
  down.values.clear();
  down.decision = AgreementDecision{{9, 9}, up.view};
  const std::vector<std::byte> down_bytes = encode(down);
  ASSERT_TRUE(decode_agreement(down_bytes, 70));
  EXPECT_EQ(encode(*decode_agreement(down_bytes, 70)), down_bytes);
  std::vector<std::byte> no_decision = down_bytes;
  no_decision[6] = std::byte{0};  // a down without its decision
  EXPECT_FALSE(decode_agreement(no_decision, 70));
}

// The members' channels: messages wait in one pool until the network delivers one it picks;
// a dead member's channel takes and sends nothing; each survivor hears of each death on its own,
// a few steps after it.
class Network {
  struct Message {
    int from, to;
    uint64_t tag;
    std::vector<std::byte> bytes;
  };
  struct Rumor {
    int listener, dead, steps;
  };

 public:
  class Endpoint;

  Network(int members, uint64_t seed) : random_(seed) {
    for (int m = 0; m < members; ++m)
      endpoints_.push_back(std::make_unique<Endpoint>(*this, m));
  }
  Endpoint& at(int member) { return *endpoints_[static_cast<size_t>(member)]; }
  int size() const { return static_cast<int>(endpoints_.size()); }
  std::mt19937_64& random() { return random_; }

  // A member dies: what it has in flight is lost or not, by a coin each; the others hear late.
  void kill(int member) {
    at(member).dead_ = true;
    std::erase_if(pool_, [&](const Message& m) { return m.from == member && random_() % 2; });
    for (int other = 0; other < size(); ++other) {
      if (other != member) rumors_.push_back({other, member, 1 + static_cast<int>(random_() % 40)});
    }
  }
  // One step: a message delivered, or a rumor of a death heard; false once nothing is left.
  bool step() {
    for (Rumor& r : rumors_)
      --r.steps;
    auto heard =
        std::find_if(rumors_.begin(), rumors_.end(), [](const Rumor& r) { return r.steps <= 0; });
    if (heard != rumors_.end()) {
      at(heard->listener).hear_gone(heard->dead);
      rumors_.erase(heard);
      return true;
    }
    if (pool_.empty()) return !rumors_.empty();
    const size_t pick = random_() % pool_.size();
    Message m = std::move(pool_[pick]);
    pool_.erase(pool_.begin() + static_cast<std::ptrdiff_t>(pick));
    at(m.to).arrive(std::move(m));
    return true;
  }

  class Endpoint final : public transport::Channel {
   public:
    Endpoint(Network& network, int member) : network_(network), member_(member) {}
    int rank() const override { return member_; }
    int size() const override { return network_.size(); }
    size_t max_message_size() const override { return size_t{1} << 30; }
    const Status* peer_failure(int peer) const override {
      const auto it = gone_.find(peer);
      return it == gone_.end() ? nullptr : &it->second;
    }
    size_t failures_known() const override { return gone_.size(); }
    void cancel(uint64_t first, uint64_t last) override {
      withdrawn_.add(first, last);
      std::erase_if(posted_, [&](const Posted& p) { return p.tag >= first && p.tag <= last; });
      std::erase_if(early_, [&](const Message& m) { return m.tag >= first && m.tag <= last; });
    }
    void hold_failed(int peer, const Status& why) override {
      if (gone_.emplace(peer, why).second) {
        for (int other = 0; other < size(); ++other) {  // as RoutedChannel floods it
          if (other != member_ && other != peer) network_.rumors_.push_back({other, peer, 5});
        }
      }
    }
    void tell(int peer, const transport::Notice& notice) override {
      if (dead_ || notice.kind != transport::Notice::Kind::rank_gone) return;  // heartbeats: none
      network_.rumors_.push_back({peer, static_cast<int>(notice.subject), 3});
    }
    void tell_peers(const transport::Notice&) override {}
    int poll() override {
      int events = 0;
      while (!done_.empty()) {
        auto [completion, status, bytes] = std::move(done_.front());
        done_.pop_front();
        completion(status, bytes);
        ++events;
      }
      return events;
    }

    void hear_gone(int peer) {
      if (dead_ || gone_.contains(peer)) return;
      gone_.emplace(peer, Status(Code::peer_failed, "member " + std::to_string(peer) + " died"));
      // Its receives from the dead fail, as a transport fails them.
      for (auto it = posted_.begin(); it != posted_.end();) {
        if (it->peer != peer) {
          ++it;
          continue;
        }
        done_.push_back({std::move(it->done), gone_.at(peer), 0});
        it = posted_.erase(it);
      }
    }

   private:
    friend class Network;
    struct Posted {
      int peer;
      uint64_t tag;
      std::byte* buffer;
      size_t capacity;
      transport::Completion done;
    };
    void post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                   transport::Completion done) override {
      if (dead_) return;
      const auto* bytes = static_cast<const std::byte*>(buffer);
      network_.pool_.push_back({member_, peer, tag, {bytes, bytes + length}});
      done_.push_back({std::move(done), Status(), length});  // copied: done at once
    }
    void post_recv(int peer, uint64_t tag, void* buffer, size_t capacity,
                   transport::Completion done) override {
      if (const Status* failed = peer_failure(peer)) {
        done_.push_back({std::move(done), *failed, 0});
        return;
      }
      auto early = std::find_if(early_.begin(), early_.end(),
                                [&](const Message& m) { return m.from == peer && m.tag == tag; });
      if (early != early_.end()) {
        deliver(*early, static_cast<std::byte*>(buffer), capacity, std::move(done));
        early_.erase(early);
        return;
      }
      posted_.push_back({peer, tag, static_cast<std::byte*>(buffer), capacity, std::move(done)});
    }
    void arrive(Message m) {
      if (dead_ || gone_.contains(m.from) || withdrawn_.contains(m.tag)) return;
      auto posted = std::find_if(posted_.begin(), posted_.end(), [&](const Posted& p) {
        return p.peer == m.from && p.tag == m.tag;
      });
      if (posted == posted_.end()) {
        early_.push_back(std::move(m));
        return;
      }
      deliver(m, posted->buffer, posted->capacity, std::move(posted->done));
      posted_.erase(posted);
    }
    void deliver(const Message& m, std::byte* buffer, size_t capacity, transport::Completion done) {
      std::memcpy(buffer, m.bytes.data(), std::min(capacity, m.bytes.size()));
      done_.push_back({std::move(done), Status(), m.bytes.size()});
    }

    Network& network_;
    int member_;
    bool dead_ = false;
    std::map<int, Status> gone_;
    std::vector<Posted> posted_;
    std::vector<Message> early_;
    transport::WithdrawnTags withdrawn_;
    std::deque<std::tuple<transport::Completion, Status, size_t>> done_;
  };

 private:
  std::mt19937_64 random_;
  std::vector<std::unique_ptr<Endpoint>> endpoints_;
  std::deque<Message> pool_;
  std::vector<Rumor> rumors_;
};

topo::Hierarchy one_node(int members) {
  return topo::Hierarchy(std::vector<topo::MemberPlace>(static_cast<size_t>(members)));
}

struct Run {
  int members;
  int deaths;
  uint64_t seed;
};

// Every member starts one agreement (MAX of its own number); members are killed at drawn steps,
// up to `deaths`, the leader often among them; the network runs until nothing moves. Every
// survivor must have decided, all the same, with a failed set that holds every member dead before
// the agreement began and no survivor, and the maximum of the values of members it did not hold
// failed at least.
// How many runs killed a member while the agreement ran, and how many of those ended with a
// decision that did not hold every dead member failed (one that died after deciding).
struct Tally {
  int killed_during = 0, decided_before_a_death = 0;
};

void run_agreement(const Run& run, Tally& tally) {
  Network network(run.members, run.seed);
  std::mt19937_64& random = network.random();
  std::set<int> dead;
  // One may die before it starts, and every member knows it.
  std::optional<int> dead_before;
  if (run.deaths > 0 && random() % 2) {
    dead_before = static_cast<int>(random() % static_cast<uint64_t>(run.members));
    dead.insert(*dead_before);
    network.kill(*dead_before);
  }
  while (network.step()) {
  }
  std::vector<int> members(static_cast<size_t>(run.members));
  std::iota(members.begin(), members.end(), 0);
  std::vector<std::unique_ptr<Agreement>> agreements(static_cast<size_t>(run.members));
  int kills_during = 0;
  Agreement::Settings settings;
  settings.fence_after = std::chrono::hours(1);
  for (int m = 0; m < run.members; ++m) {
    if (dead.contains(m)) continue;
    auto membership = std::make_shared<const Membership>(members, m, one_node(run.members));
    agreements[static_cast<size_t>(m)] = std::make_unique<Agreement>(
        network.at(m), membership, 42, 3, 0, Agreement::Fold::maximum,
        std::vector<uint64_t>{static_cast<uint64_t>(100 + m)}, settings);
  }
  for (int steps = 0; steps < 200000; ++steps) {
    // Now and then a live member dies: the first live member (the leader) one time in three.
    if (static_cast<int>(dead.size()) < run.deaths && random() % 8 == 0) {
      int victim = static_cast<int>(random() % static_cast<uint64_t>(run.members));
      if (random() % 3 == 0) {
        for (victim = 0; dead.contains(victim); ++victim) {
        }
      }
      if (dead.insert(victim).second) {
        agreements[static_cast<size_t>(victim)].reset();
        network.kill(victim);
        ++kills_during;
      }
    }
    const bool moved = network.step();
    for (int m = 0; m < run.members; ++m) {
      if (!agreements[static_cast<size_t>(m)]) continue;
      network.at(m).poll();
      agreements[static_cast<size_t>(m)]->advance();
    }
    const bool all_decided = std::all_of(agreements.begin(), agreements.end(),
                                         [](const auto& a) { return !a || a->decided(); });
    if (!moved && all_decided) break;
  }
  const std::string where =
      "seed " + std::to_string(run.seed) + ", " + std::to_string(run.members) + " members, dead:";
  std::string dead_list;
  for (int d : dead)
    dead_list += " " + std::to_string(d);
  const AgreementDecision* first = nullptr;
  for (int m = 0; m < run.members; ++m) {
    const Agreement* a = agreements[static_cast<size_t>(m)].get();
    if (!a) continue;
    ASSERT_TRUE(a->decided()) << where << dead_list << ": member " << m
                              << " undecided: " << a->describe();
    const AgreementDecision& d = a->decision();
    if (!first) first = &d;
    ASSERT_TRUE(d == *first) << where << dead_list << ": member " << m << " decided otherwise";
    EXPECT_FALSE(d.failed.contains(m)) << where << dead_list << ": a survivor held failed";
    if (dead_before) {
      EXPECT_TRUE(d.failed.contains(*dead_before)) << where << dead_list;
    }
    uint64_t most = 0;
    for (int v = 0; v < run.members; ++v) {
      if (!d.failed.contains(v)) most = std::max<uint64_t>(most, 100 + static_cast<uint64_t>(v));
    }
    EXPECT_GE(d.values[0], most) << where << dead_list;
  }
  if (kills_during > 0) ++tally.killed_during;
  if (first && first->failed.count() < static_cast<int>(dead.size()))
    ++tally.decided_before_a_death;
}

TEST(AgreementProtocol, EveryOrderOfDeliveryAndDeathDecidesOneThing) {
  const int sizes[] = {1, 2, 3, 5, 8, 13, 33};
  // Under the sanitizers each run costs some 50 times more: fewer seeds test its memory alike.
#if defined(__SANITIZE_ADDRESS__)
  constexpr uint64_t kSeeds = 250;
#else
  constexpr uint64_t kSeeds = 2000;
#endif
  Tally tally;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const int members = sizes[seed % std::size(sizes)];
    const int deaths = seed % 4 == 0 ? 0 : std::min(members - 1, 1 + static_cast<int>(seed % 3));
    run_agreement({members, deaths, seed}, tally);
    if (HasFatalFailure()) return;
  }
  std::printf("%d runs lost members while agreeing; in %d of them some died after the decision\n",
              tally.killed_during, tally.decided_before_a_death);
  EXPECT_GT(tally.killed_during, static_cast<int>(kSeeds / 4));
}

}  // namespace
}  // namespace ibcoll::collectives
