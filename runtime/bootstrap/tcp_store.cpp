#include "runtime/bootstrap/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <thread>
#include <utility>

#include "base/deadline.h"
#include "base/log.h"
#include "base/status.h"
#include "runtime/bootstrap/store_frames.h"

namespace ibcoll::runtime {
namespace {

using namespace store_frames;

// Shorter secrets are refused unless the store is on loopback (32 random bytes in hex: 64).
constexpr size_t kMinSecret = 16;
// Before a client has presented the secret: how long it may take (its frame is kMaxHelloFrame
// at most), so a stranger can make the server hold neither memory nor a connection for long
// (nor longer than IBCOLL_TIMEOUT); and how many such clients the server keeps at once.
constexpr auto kHelloDeadline = std::chrono::seconds(10);
constexpr size_t kMaxStrangers = 256;
// Replies a client has not read yet, at most: one that stops reading is dropped, never waited for.
constexpr size_t kMaxUnread = size_t{4} * kMaxFrame;

// Sends what the socket takes now (it is non-blocking): the bytes sent. Throws on an error:
// peer_failed where the other end closed the connection.
size_t send_some(int fd, const char* bytes, size_t size) {
  while (true) {
    const ssize_t n = ::send(fd, bytes, size, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
    if (errno == EPIPE || errno == ECONNRESET) {
      throw Error(Code::peer_failed, "bootstrap: the other end closed the connection");
    }
    throw_errno("bootstrap: send", errno);
  }
}

// Waits until `fd` is ready for `events` or the deadline passes (signals do not cut it short);
// false at the deadline.
bool wait_for(int fd, short events, const Deadline& deadline) {
  while (!deadline.expired()) {
    pollfd p{fd, events, 0};
    const int ready =
        ::poll(&p, 1, static_cast<int>(std::clamp<long>(deadline.remaining().count(), 1, 1000)));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) throw_errno("bootstrap: poll", errno);
  }
  return false;
}

// A client whose node dies sends no FIN: the kernel's keepalive probes find it (in about 11 s),
// and the server loses its rank as one that exited.
void probe_when_idle(int fd) {
  const int on = 1, idle_s = 5, interval_s = 2, probes = 3;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof(idle_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof(interval_s));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof(probes));
}

bool connected_to_itself(int fd) {
  sockaddr_storage local{}, peer{};
  socklen_t local_size = sizeof(local), peer_size = sizeof(peer);
  return ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_size) == 0 &&
         ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_size) == 0 &&
         local_size == peer_size && std::memcmp(&local, &peer, local_size) == 0;
}

// A non-blocking socket connected to `a` within a few seconds and by the deadline, or -1 (errno
// in `last_errno`): a blocking connect to a host that never answers waits out the kernel's SYN
// retries (minutes), whatever IBCOLL_TIMEOUT says, and never gets to the next address.
int connect_within(const addrinfo& a, const Deadline& overall, int& last_errno) {
  constexpr auto kAttempt = std::chrono::seconds(5);
  const Deadline deadline = Deadline::at(std::min(overall.when(), Clock::now() + kAttempt));
  const int fd = ::socket(a.ai_family, a.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a.ai_protocol);
  if (fd < 0) {
    last_errno = errno;
    return -1;
  }
  int error = ::connect(fd, a.ai_addr, a.ai_addrlen) == 0 ? 0 : errno;
  if (error == EINPROGRESS) {
    socklen_t size = sizeof(error);
    error = wait_for(fd, POLLOUT, deadline) ? 0 : ETIMEDOUT;
    if (!error && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) < 0) error = errno;
  }
  // A connection to a port of this host on which nothing listens yet (rank 0 has not made the
  // store) may be given that same port as its own, if it lies in the ephemeral range, and then
  // connects to itself (TCP's simultaneous open): it would hold the store's port and answer
  // its own hello. Seen as rank 0's "Address already in use" and every other rank's timeout.
  if (!error && connected_to_itself(fd)) error = ECONNREFUSED;
  if (error) {
    last_errno = error;
    ::close(fd);
    return -1;
  }
  return fd;
}

bool secrets_equal(const std::string& a, const std::string& b) {
  unsigned char diff = a.size() != b.size();
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return diff == 0;
}

addrinfo* resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &result)) {
    throw Error(Code::invalid_argument,
                "IBCOLL_BOOTSTRAP: cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  return result;
}

// Whether every address `host` names is this machine's loopback: a store there is out of reach
// of other hosts.
bool only_loopback(const std::string& host, int port) {
  addrinfo* ai = resolve(host, port, false);
  bool loopback = ai != nullptr;
  for (addrinfo* a = ai; a; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      const auto* v4 = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      loopback &= (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    } else {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      loopback &= a->ai_family == AF_INET6 && IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    }
  }
  freeaddrinfo(ai);
  return loopback;
}

}  // namespace

std::pair<std::string, int> parse_host_port(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    throw Error(Code::invalid_argument, "IBCOLL_BOOTSTRAP: '" + address + "' is not host:port");
  }
  const std::string port_text = address.substr(colon + 1);
  char* end = nullptr;
  long port = std::strtol(port_text.c_str(), &end, 10);
  if (port_text.empty() || *end != '\0' || port < 1 || port > 65535) {
    throw Error(Code::invalid_argument,
                "IBCOLL_BOOTSTRAP: '" + port_text + "' is not a port number");
  }
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, static_cast<int>(port)};
}

// The server: one thread, poll() over the listener and the clients, every socket non-blocking:
// a reply a client does not read yet waits in its own queue, so one stalled client holds up
// nobody else. An allgather's reply is one frame that every rank's queue shares.
class TcpStore::Server {
 public:
  Server(const std::string& host, int port, int size, std::string secret,
         std::chrono::milliseconds timeout)
      : size_(size),
        identified_(static_cast<size_t>(size)),
        secret_(std::move(secret)),
        timeout_(timeout) {
    addrinfo* ai = resolve(host, port, true);
    for (addrinfo* a = ai; a && listener_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      int one = 1;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
        listener_ = fd;
      } else {
        bind_errno_ = errno;
        ::close(fd);
      }
    }
    freeaddrinfo(ai);
    if (listener_ < 0) {
      throw_errno("bootstrap: listening on " + host + ":" + std::to_string(port), bind_errno_);
    }
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    thread_ = std::thread([this] { run(); });
  }

  // Stop as soon as asked, without waiting for the ranks to hang up.
  void linger_no_more() { linger_no_more_.store(true); }

  ~Server() {
    stop_.store(true);
    thread_.join();
    for (auto& c : clients_)
      ::close(c.fd);
    ::close(listener_);
    if (spare_fd_ >= 0) ::close(spare_fd_);
  }

 private:
  using Frame = std::shared_ptr<const std::string>;
  struct Client {
    int fd;
    Clock::time_point arrived;
    std::string in;         // received and not yet handled
    std::deque<Frame> out;  // to send, not yet taken by the socket
    size_t front_sent = 0;  // of out.front()
    size_t unsent = 0;      // bytes in out
    bool authenticated = false;
    int rank = -1;  // once identified
    bool said_bye = false;
    bool without_descriptor = false;  // taken on the spare, only to be told why it cannot be served
  };

  void run() {
    Clock::time_point stop_requested{};
    std::vector<pollfd> fds;  // kept: it wakes every 50 ms, for the whole job
    while (true) {
      if (stop_.load()) {
        if (stop_requested == Clock::time_point{}) stop_requested = Clock::now();
        // Serve until every rank has come (joined, or been turned away) and gone, or the
        // linger time is over: a rank that comes late still learns why the job failed.
        if ((clients_.empty() && joined_ + turned_away_ >= size_) ||
            Clock::now() - stop_requested > timeout_ || linger_no_more_.load()) {
          return;
        }
      }
      // Out of descriptors with none spare: the listener rests, or poll would spin on it.
      fds.assign(1,
                 {listener_, static_cast<short>(Clock::now() < accepts_resume_ ? 0 : POLLIN), 0});
      for (auto& c : clients_)
        fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      const int ready = ::poll(fds.data(), fds.size(), 50);
      const auto now = Clock::now();
      for (size_t i = fds.size() - 1; i >= 1; --i) {
        Client& c = clients_[i - 1];
        const bool stranger_too_long =
            !c.authenticated &&
            now - c.arrived > std::min<Clock::duration>(kHelloDeadline, timeout_);
        if (stranger_too_long || (ready > 0 && fds[i].revents && !serve(c, fds[i].revents))) {
          drop(i - 1);
        }
      }
      if (ready > 0 && (fds[0].revents & POLLIN)) accept_client();  // after: it moves clients_
      give_up_overdue_gathers(now);
    }
  }

  // An allgather some ranks never join (fewer ranks started than the job's size says, or one
  // stuck before it) fails at every rank in it with the ranks it lacks, at nine tenths of the
  // deadline: before the first rank in gives up on its own, knowing only that no answer came.
  // A rank that comes later gets the same answer at once.
  void give_up_overdue_gathers(Clock::time_point now) {
    if (timeout_.count() == 0) return;  // IBCOLL_TIMEOUT=0: no deadline
    for (auto it = gathers_.begin(); it != gathers_.end();) {
      const Gather& g = it->second;
      if (now - g.started < timeout_ * 9 / 10) {
        ++it;
        continue;
      }
      std::string missing;
      int listed = 0;
      for (size_t r = 0; r < g.parts.size(); ++r) {
        if (g.parts[r]) continue;
        if (++listed <= 8) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      }
      if (listed > 8) missing += " and " + std::to_string(listed - 8) + " more";
      const auto why = std::make_shared<const std::string>(
          frame(kLost, "bootstrap: allgather " + it->first + ": " + std::to_string(g.count) +
                           " of " + std::to_string(size_) + " ranks gave their part in " +
                           std::to_string(timeout_.count() * 9 / 10) + " ms, never rank " +
                           missing + " (were fewer ranks started than the job's size?)"));
      for (int fd : g.waiters)
        queue_for(fd, why);
      abandoned_[it->first] = why;
      it = gathers_.erase(it);
    }
  }

  void accept_client() {
    const int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE)) return take_with_the_spare(errno);
    if (fd < 0) return;
    probe_when_idle(fd);
    const size_t strangers = static_cast<size_t>(std::count_if(
        clients_.begin(), clients_.end(), [](const Client& c) { return !c.authenticated; }));
    if (strangers >= kMaxStrangers) {  // the oldest stranger makes room
      for (size_t i = 0; i < clients_.size(); ++i) {
        if (!clients_[i].authenticated) {
          drop(i);
          break;
        }
      }
    }
    clients_.push_back({fd, Clock::now(), {}, {}});
  }

  // No descriptor for a connection: the spare one is given up to take it. Once it shows the
  // job's secret it is told why it cannot be served, and so is every rank waiting in an exchange
  // (that rank will never join); a stranger is only dropped.
  void take_with_the_spare(int err) {
    rlimit limit{};
    getrlimit(RLIMIT_NOFILE, &limit);
    no_descriptor_ = "bootstrap: the TCP store (on rank 0) cannot take a rank's connection: " +
                     std::string(std::strerror(err)) + " (its RLIMIT_NOFILE is " +
                     std::to_string(limit.rlim_cur) + ")";
    int fd = -1;
    if (spare_fd_ >= 0) {
      ::close(spare_fd_);
      spare_fd_ = -1;
      fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    }
    if (fd < 0) {
      accepts_resume_ = Clock::now() + std::chrono::milliseconds(100);
      return;
    }
    clients_.push_back({fd, Clock::now(), {}, {}});
    clients_.back().without_descriptor = true;
  }

  // A rank of the job whose connection came in on the spare: false (drop it once told).
  bool turn_away(Client& c) {
    ++turned_away_;
    if (lost_.empty()) IBCOLL_LOG(warn, no_descriptor_);
    fail_waiters(no_descriptor_);
    reply(c, kLost, no_descriptor_);
    return false;
  }

  void drop(size_t i) {
    const Client& c = clients_[i];
    const int fd = c.fd;
    for (auto& [key, fds] : waiters_)
      std::erase(fds, fd);
    for (auto& [name, gather] : gathers_)
      std::erase(gather.waiters, fd);
    if (c.rank >= 0 && !c.said_bye) lose(c.rank);
    ::close(fd);
    clients_.erase(clients_.begin() + static_cast<long>(i));
    if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  }

  // A rank's connection ended without a goodbye (it exited or crashed without finalizing): no
  // waiter's key can be expected any more (every wait is part of a whole job's exchange), so
  // every waiter learns why now rather than at its deadline.
  void lose(int rank) {
    const std::string why = "bootstrap: rank " + std::to_string(rank) +
                            " left the job without finalizing (its connection to the TCP store "
                            "ended)";
    IBCOLL_LOG(warn, why);
    gone_.emplace(rank, why);
    fail_waiters(why);
  }

  // From now on no exchange can complete: every waiter learns `why` now, and later requests
  // that would wait learn it at once.
  void fail_waiters(const std::string& why) {
    if (!lost_.empty()) return;  // the waiters know already
    lost_ = why;
    for (auto& [key, fds] : waiters_) {
      for (int fd : fds)
        queue_for(fd, frame(kLost, lost_ + ", awaiting " + key));
    }
    waiters_.clear();
    for (auto& [name, gather] : gathers_) {
      for (int fd : gather.waiters)
        queue_for(fd, frame(kLost, lost_ + ", in allgather " + name));
    }
    gathers_.clear();
  }

  // Queues `f` for the client on `fd`, if it is still there. Queued only: its socket takes it
  // when poll() says so, and what goes wrong then drops that client, not the one served now.
  void queue_for(int fd, Frame f) {
    auto client =
        std::find_if(clients_.begin(), clients_.end(), [&](const Client& c) { return c.fd == fd; });
    if (client != clients_.end()) queue(*client, std::move(f));
  }
  void queue_for(int fd, std::string f) {
    queue_for(fd, std::make_shared<const std::string>(std::move(f)));
  }
  static void queue(Client& c, Frame f) {
    c.unsent += f->size();
    c.out.push_back(std::move(f));
  }

  // Rank `c.rank`'s part of allgather `name`; false when it gave one already. The last part
  // in sends every waiting rank the whole, one frame for all.
  bool gather(Client& c, const std::string& name, std::string part) {
    if (!lost_.empty()) return reply(c, kLost, lost_ + ", in allgather " + name);
    if (const auto late = abandoned_.find(name); late != abandoned_.end()) {
      queue(c, late->second);
      return flush(c);
    }
    Gather& g = gathers_[name];
    if (g.parts.empty()) {
      g.parts.resize(static_cast<size_t>(size_));
      g.started = Clock::now();
    }
    auto& slot = g.parts[static_cast<size_t>(c.rank)];
    if (slot) return false;
    slot = std::move(part);
    g.waiters.push_back(c.fd);
    if (++g.count < size_) return true;
    size_t total = 0;
    for (const auto& p : g.parts)
      total += 4 + p->size();
    std::vector<std::string_view> parts;
    for (const auto& p : g.parts)
      parts.push_back(*p);
    // Past the frame no client would take it: every rank learns why instead.
    const auto whole = std::make_shared<const std::string>(
        total < kMaxFrame
            ? frame(kValue, joined_parts(parts))
            : frame(kLost, "bootstrap: allgather " + name + " holds " + std::to_string(total) +
                               " bytes, past the TCP store's frame of " +
                               std::to_string(kMaxFrame) + " bytes"));
    const std::vector<int> waiters = std::move(g.waiters);
    gathers_.erase(name);
    for (int fd : waiters)
      queue_for(fd, whole);
    return flush(c);
  }

  // Queues a frame for `c` and sends what its socket takes now; false if it reads too little.
  bool reply(Client& c, char op, const std::string& body) {
    queue(c, std::make_shared<const std::string>(frame(op, body)));
    return flush(c);
  }
  bool flush(Client& c) {
    while (!c.out.empty()) {
      const std::string& f = *c.out.front();
      const size_t n = send_some(c.fd, f.data() + c.front_sent, f.size() - c.front_sent);
      c.front_sent += n;
      c.unsent -= n;
      if (c.front_sent < f.size()) break;
      c.out.pop_front();
      c.front_sent = 0;
    }
    return c.unsent <= kMaxUnread;
  }

  // Handles what happened on the client's socket; false when it hung up or misbehaved.
  bool serve(Client& c, short revents) {
    try {
      if ((revents & POLLOUT) && !flush(c)) return false;
      if (!(revents & (POLLIN | POLLHUP | POLLERR))) return true;
      char chunk[4096];
      ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return true;
      if (n <= 0) return false;
      c.in.append(chunk, static_cast<size_t>(n));
      char op;
      std::string body;
      while (true) {
        const Taken taken =
            take_frame(c.in, op, body, c.authenticated ? kMaxFrame : kMaxHelloFrame);
        if (taken == Taken::malformed) return false;
        if (taken == Taken::none) break;
        if (!c.authenticated) {
          if (op != kHello || !secrets_equal(body, secret_)) {
            IBCOLL_LOG(warn, "bootstrap: rejected a client that did not present the job secret");
            reply(c, kRejected, "");
            return false;
          }
          if (c.without_descriptor) return turn_away(c);
          c.authenticated = true;
          ++joined_;
          if (!reply(c, kAccepted, "")) return false;
        } else if (op == kSet) {
          std::optional<Named> set = split_named(body);
          if (!set) return false;
          const std::string& key = set->name;
          const std::string& value = values_[key] = std::move(set->rest);
          for (int fd : waiters_[key])
            queue_for(fd, frame(kValue, value));
          waiters_.erase(key);
        } else if (op == kGet) {
          if (auto it = values_.find(body); it != values_.end()) {
            if (!reply(c, kValue, it->second)) return false;
          } else if (!lost_.empty()) {
            if (!reply(c, kLost, lost_ + ", awaiting " + body)) return false;
          } else {
            waiters_[body].push_back(c.fd);
          }
        } else if (op == kIdentify && c.rank < 0) {
          const std::optional<uint32_t> rank = rank_of(body);
          if (!rank || *rank >= static_cast<uint32_t>(size_)) return false;
          if (identified_[*rank]) {  // the job's next store's client
            reply(c, kComeBack, "");
            return false;
          }
          identified_[*rank] = true;
          c.rank = static_cast<int>(*rank);
          if (!reply(c, kAccepted, "")) return false;
        } else if (op == kAskGone) {
          const std::optional<uint32_t> rank = rank_of(body);
          if (!rank) return false;
          const auto it = gone_.find(static_cast<int>(*rank));
          if (!reply(c, kValue, it == gone_.end() ? "" : it->second)) return false;
        } else if (op == kGather && c.rank >= 0) {
          std::optional<Named> part = split_named(body);
          if (!part || !gather(c, part->name, std::move(part->rest))) return false;
        } else if (op == kBye) {
          c.said_bye = true;
        } else {
          return false;
        }
      }
    } catch (const Error&) {
      return false;
    }
    return true;
  }

  int size_;
  int joined_ = 0;                // clients that presented the secret
  int turned_away_ = 0;           // ranks whose connection found no descriptor: they never join
  std::string no_descriptor_;     // why, for them and the waiters
  std::vector<bool> identified_;  // by rank: it has been a client (it may have left since)
  std::string secret_;
  // IBCOLL_TIMEOUT: how long the server waits for the ranks to hang up at the end, for a
  // stranger's hello, for an allgather to fill.
  std::chrono::milliseconds timeout_;
  std::atomic<bool> linger_no_more_{false};
  int listener_ = -1;
  int bind_errno_ = 0;
  int spare_fd_ = -1;                 // given up to turn a rank away when out of descriptors
  Clock::time_point accepts_resume_;  // until then the listener rests (no descriptor to take)
  std::atomic<bool> stop_{false};
  std::vector<Client> clients_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<int>> waiters_;
  struct Gather {
    std::vector<std::optional<std::string>> parts;  // by rank, once given
    int count = 0;
    std::vector<int> waiters;   // the clients that gave theirs
    Clock::time_point started;  // when the first part came
  };
  std::map<std::string, Gather> gathers_;
  std::map<std::string, Frame> abandoned_;  // allgathers given up, and why
  std::string lost_;                        // why gets of missing keys fail, once a rank is lost
  std::map<int, std::string> gone_;         // the ranks lost, and why
  std::thread thread_;
};

TcpStore::TcpStore(const std::string& address, int rank, int size, const std::string& secret,
                   std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), address_(address), timeout_(timeout) {
  auto [host, port] = parse_host_port(address);
  if (secret.size() < kMinSecret && !only_loopback(host, port)) {
    throw Error(Code::invalid_argument,
                "IBCOLL_JOB_SECRET: a TCP store other hosts can reach needs a secret of at least " +
                    std::to_string(kMinSecret) +
                    " characters, the same on every rank (README shows how to make one)");
  }
  if (rank == 0) server_ = std::make_unique<Server>(host, port, size, secret, timeout);

  const Deadline deadline(timeout);
  while (!join(host, port, secret, deadline)) {  // the job's previous store is on its way out
    if (deadline.expired()) {
      throw Error(Code::timeout, "bootstrap: the TCP store at " + address +
                                     " did not take this rank within " +
                                     std::to_string(timeout.count()) +
                                     " ms (IBCOLL_TIMEOUT): it still served the job's previous "
                                     "one, or closed each connection before answering");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool TcpStore::join(const std::string& host, int port, const std::string& secret,
                    const Deadline& deadline) {
  int last_errno = 0;
  while (fd_ < 0) {
    addrinfo* ai = resolve(host, port, false);
    for (addrinfo* a = ai; a && fd_ < 0; a = a->ai_next) {
      const int fd = connect_within(*a, deadline, last_errno);
      if (fd >= 0) fd_ = fd;
    }
    freeaddrinfo(ai);
    if (fd_ >= 0) break;
    if (deadline.expired()) {
      throw Error(Code::timeout, "bootstrap: cannot reach the TCP store at " + address_ +
                                     " within " + std::to_string(timeout_.count()) + " ms (" +
                                     std::strerror(last_errno) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  try {
    request(kHello, secret);
    reply();
    request(kIdentify, rank_body(static_cast<uint32_t>(rank_)));
    char op;
    std::string body;
    take_reply(op, body, timeout_);
    if (op != kComeBack && op != kAccepted) {
      throw Error(Code::internal, "bootstrap: the TCP store answered oddly");
    }
    if (op == kAccepted) return true;
  } catch (const Error&) {
    if (!closed_) {
      ::close(fd_);
      throw;
    }
  }
  ::close(fd_);
  fd_ = -1;
  in_.clear();
  closed_ = false;
  return false;
}

void TcpStore::leave_without_everyone() {
  if (server_) server_->linger_no_more();
}

TcpStore::~TcpStore() {
  if (!broken_) {  // leaving in order; best effort: a full socket loses only the goodbye
    const std::string bye = frame(kBye, "");
    try {
      send_some(fd_, bye.data(), bye.size());
    } catch (const Error&) {  // the store is gone already: nobody to tell
    }
  }
  ::close(fd_);
  server_.reset();  // serves until every rank has joined and hung up (or the timeout passes)
}

void TcpStore::request(char op, const std::string& body) {
  if (broken_) {
    throw Error(Code::peer_failed,
                "bootstrap: the TCP store connection is unusable after an earlier timeout");
  }
  const std::string bytes = frame(op, body);
  const Deadline deadline(timeout_);
  for (size_t done = 0; done < bytes.size();) {
    try {
      done += send_some(fd_, bytes.data() + done, bytes.size() - done);
    } catch (const Error& e) {
      closed_ = e.status().code() == Code::peer_failed;
      throw;
    }
    if (done < bytes.size() && !wait_for(fd_, POLLOUT, deadline)) {
      broken_ = true;  // half a frame went out
      throw Error(Code::timeout, "bootstrap: the TCP store took no request within " +
                                     std::to_string(timeout_.count()) + " ms (IBCOLL_TIMEOUT)");
    }
  }
}

std::string TcpStore::reply(std::chrono::milliseconds wait) {
  char op;
  std::string body;
  take_reply(op, body, wait);
  if (op == kRejected) {
    throw Error(Code::peer_failed,
                "bootstrap: the TCP store rejected this process (wrong IBCOLL_JOB_SECRET?)");
  }
  if (op == kLost) throw Error(Code::peer_failed, body);
  return body;
}

void TcpStore::take_reply(char& op, std::string& body, std::chrono::milliseconds wait) {
  const Deadline deadline(wait);
  while (true) {
    const Taken taken = take_frame(in_, op, body, kMaxFrame);
    if (taken == Taken::frame) return;
    if (taken == Taken::malformed) {
      broken_ = true;  // the stream lost its frames: nothing more can be read from it
      throw Error(Code::internal, "bootstrap: bad frame");
    }
    if (!wait_for(fd_, POLLIN, deadline)) {
      broken_ = true;  // a late answer would be taken for the next request's
      throw Error(Code::timeout, "bootstrap: the TCP store did not answer within " +
                                     std::to_string(wait.count()) + " ms" +
                                     (wait == timeout_ ? " (IBCOLL_TIMEOUT)" : ""));
    }
    char chunk[4096];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
    if (n <= 0) {
      closed_ = true;
      throw Error(Code::peer_failed, "bootstrap: the TCP store closed the connection");
    }
    in_.append(chunk, static_cast<size_t>(n));
  }
}

void TcpStore::set(const std::string& key, const std::string& value) {
  request(kSet, named(key, value));
}

std::string TcpStore::get(const std::string& key) {
  request(kGet, key);
  return reply();
}

std::string TcpStore::why_gone(int rank) {
  // A liveness question, asked from the progress engine: a store that does not answer soon
  // cannot help, and the caller goes on waiting.
  constexpr std::chrono::milliseconds kAnswerWithin{5000};
  try {
    request(kAskGone, rank_body(static_cast<uint32_t>(rank)));
    return reply(std::min(timeout_, kAnswerWithin));
  } catch (const Error& e) {
    IBCOLL_LOG(debug, "bootstrap: cannot ask whether rank " << rank << " is gone: " << e.what());
    return {};
  }
}

std::vector<std::string> TcpStore::allgather(const std::string& name, const std::string& mine) {
  request(kGather, named(name, mine));
  std::optional<std::vector<std::string>> all = split_parts(reply());
  if (!all || all->size() != static_cast<size_t>(size_)) {
    throw Error(Code::peer_failed,
                "bootstrap: the TCP store's allgather " + name + " came back malformed");
  }
  return std::move(*all);
}

}  // namespace ibcoll::runtime
