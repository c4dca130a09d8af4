// TcpStore: the out-of-band key-value store that lets N processes swap addresses. Rank 0 serves
// it on host:port from a background thread; every rank (rank 0 too) connects as a client and
// must first present the job's secret, so a stranger on the network cannot join or read.
// get() waits for a key until the deadline, or fails at once once a rank has left the job
// without finalizing (its connection ended without a goodbye). An allgather (and a barrier) is
// one request per rank that the server completes: each rank then gets every part in one reply,
// so the store handles P requests per allgather, not P gets per rank.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/deadline.h"
#include "runtime/bootstrap/bootstrap.h"

namespace ibcoll::runtime {

class TcpStore final : public Bootstrap {
 public:
  // `address` is host:port. Throws Error(invalid_argument) for a bad address or empty secret,
  // Error(timeout) if the server cannot be reached in time, Error(peer_failed) if it rejects us.
  TcpStore(const std::string& address, int rank, int size, const std::string& secret,
           std::chrono::milliseconds timeout);
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key);
  std::vector<std::string> allgather(const std::string& name, const std::string& mine) override;
  void leave_without_everyone() override;
  // Asks the store, waiting for its answer a few seconds at most.
  std::string why_gone(int rank) override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string describe() const override { return "TCP store at " + address_; }

 private:
  class Server;
  // Connects, presents the secret and says which rank it is; false where the store at the
  // address served this rank already (the job's previous store, still serving the others'
  // goodbyes), or closed the connection before taking this rank (that store ending just then:
  // the connection was still in its queue, or it took it and then ended): nothing is left open
  // then.
  bool join(const std::string& host, int port, const std::string& secret, const Deadline& deadline);
  void request(char op, const std::string& body);
  // The next frame (op and body), whatever it is; Error(timeout) after `wait`.
  void take_reply(char& op, std::string& body, std::chrono::milliseconds wait);
  std::string reply(std::chrono::milliseconds wait);
  std::string reply() { return reply(timeout_); }

  int rank_, size_;
  std::string address_;
  std::chrono::milliseconds timeout_;
  std::unique_ptr<Server> server_;
  int fd_ = -1;
  std::string in_;       // bytes received and not yet consumed
  bool broken_ = false;  // a request timed out: its answer may still come
  bool closed_ = false;  // the store closed the connection
};

// host:port → (host, port); throws Error(invalid_argument) naming IBCOLL_BOOTSTRAP.
std::pair<std::string, int> parse_host_port(const std::string& address);

}  // namespace ibcoll::runtime
