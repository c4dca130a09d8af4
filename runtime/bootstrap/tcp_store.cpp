#include "runtime/bootstrap/tcp_store.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "base/deadline.h"
#include "base/log.h"
#include "base/status.h"

namespace ibcoll::runtime {
namespace {

// Frames: u32 length of what follows, then a one-byte op and its body.
constexpr char kHello = 'H', kAccepted = 'A', kRejected = 'R', kSet = 'S', kGet = 'G', kValue = 'V';
constexpr uint32_t kMaxFrame = 64u << 20;

std::string frame(char op, const std::string& body) {
  const uint32_t length = static_cast<uint32_t>(body.size() + 1);
  std::string out(4, '\0');
  std::memcpy(out.data(), &length, 4);
  out += op;
  out += body;
  return out;
}

void write_all(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw_errno("bootstrap: send", errno);
    done += static_cast<size_t>(n);
  }
}

// Takes one whole frame off the front of `buffer`, if there is one.
bool take_frame(std::string& buffer, char& op, std::string& body) {
  if (buffer.size() < 4) return false;
  uint32_t length;
  std::memcpy(&length, buffer.data(), 4);
  if (length == 0 || length > kMaxFrame) throw Error(Code::internal, "bootstrap: bad frame");
  if (buffer.size() < 4 + size_t{length}) return false;
  op = buffer[4];
  body = buffer.substr(5, length - 1);
  buffer.erase(0, 4 + size_t{length});
  return true;
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

// The server: one thread, poll() over the listener and the clients.
class TcpStore::Server {
 public:
  Server(const std::string& host, int port, int size, std::string secret,
         std::chrono::milliseconds linger)
      : size_(size), secret_(std::move(secret)), linger_(linger) {
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
    thread_ = std::thread([this] { run(); });
  }

  ~Server() {
    stop_.store(true);
    thread_.join();
    for (auto& c : clients_)
      ::close(c.fd);
    ::close(listener_);
  }

 private:
  struct Client {
    int fd;
    std::string in;
    bool authenticated = false;
  };

  void run() {
    Clock::time_point stop_requested{};
    while (true) {
      if (stop_.load()) {
        if (stop_requested == Clock::time_point{}) stop_requested = Clock::now();
        // Serve until every rank has come and gone, or the linger time is over.
        if ((clients_.empty() && joined_ >= size_) || Clock::now() - stop_requested > linger_) {
          return;
        }
      }
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (auto& c : clients_)
        fds.push_back({c.fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) clients_.push_back({fd, {}});
      }
      for (size_t i = fds.size() - 1; i >= 1; --i) {
        if (fds[i].revents && !serve(clients_[i - 1])) {
          drop_waiter(clients_[i - 1].fd);
          ::close(clients_[i - 1].fd);
          clients_.erase(clients_.begin() + static_cast<long>(i - 1));
        }
      }
    }
  }

  // Reads what the client sent; false when it hung up or misbehaved.
  bool serve(Client& c) {
    char chunk[4096];
    ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), 0);
    if (n <= 0) return false;
    c.in.append(chunk, static_cast<size_t>(n));
    try {
      char op;
      std::string body;
      while (take_frame(c.in, op, body)) {
        if (!c.authenticated) {
          if (op != kHello || !secrets_equal(body, secret_)) {
            IBCOLL_LOG(warn, "bootstrap: rejected a client that did not present the job secret");
            write_all(c.fd, frame(kRejected, ""));
            return false;
          }
          c.authenticated = true;
          ++joined_;
          write_all(c.fd, frame(kAccepted, ""));
        } else if (op == kSet) {
          uint32_t key_length;
          if (body.size() < 4) return false;
          std::memcpy(&key_length, body.data(), 4);
          if (body.size() < 4 + size_t{key_length}) return false;
          std::string key = body.substr(4, key_length);
          values_[key] = body.substr(4 + key_length);
          for (int fd : waiters_[key])
            write_all(fd, frame(kValue, values_[key]));
          waiters_.erase(key);
        } else if (op == kGet) {
          if (auto it = values_.find(body); it != values_.end()) {
            write_all(c.fd, frame(kValue, it->second));
          } else {
            waiters_[body].push_back(c.fd);
          }
        } else {
          return false;
        }
      }
    } catch (const Error&) {
      return false;
    }
    return true;
  }

  void drop_waiter(int fd) {
    for (auto& [key, fds] : waiters_)
      std::erase(fds, fd);
  }

  int size_;
  int joined_ = 0;  // clients that presented the secret
  std::string secret_;
  std::chrono::milliseconds linger_;
  int listener_ = -1;
  int bind_errno_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<Client> clients_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<int>> waiters_;
  std::thread thread_;
};

TcpStore::TcpStore(const std::string& address, int rank, int size, const std::string& secret,
                   std::chrono::milliseconds timeout)
    : rank_(rank), size_(size), timeout_(timeout) {
  if (secret.empty()) {
    throw Error(Code::invalid_argument,
                "IBCOLL_JOB_SECRET: must be set (the same value on every rank) for the TCP store");
  }
  auto [host, port] = parse_host_port(address);
  if (rank == 0) server_ = std::make_unique<Server>(host, port, size, secret, timeout);

  const Deadline deadline(timeout);
  int last_errno = 0;
  while (fd_ < 0) {
    addrinfo* ai = resolve(host, port, false);
    for (addrinfo* a = ai; a && fd_ < 0; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last_errno = errno;
        if (fd >= 0) ::close(fd);
      }
    }
    freeaddrinfo(ai);
    if (fd_ >= 0) break;
    if (deadline.expired()) {
      throw Error(Code::timeout, "bootstrap: cannot reach the TCP store at " + address +
                                     " within " + std::to_string(timeout.count()) + " ms (" +
                                     std::strerror(last_errno) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  try {
    request(kHello, secret);
    reply();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

TcpStore::~TcpStore() {
  if (fd_ >= 0) ::close(fd_);
  server_.reset();  // serves until every rank has joined and hung up (or the timeout passes)
}

void TcpStore::request(char op, const std::string& body) {
  if (broken_) {
    throw Error(Code::peer_failed,
                "bootstrap: the TCP store connection is unusable after an earlier timeout");
  }
  write_all(fd_, frame(op, body));
}

std::string TcpStore::reply() {
  const Deadline deadline(timeout_);
  char op;
  std::string body;
  while (!take_frame(in_, op, body)) {
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::max<long>(1, deadline.remaining().count())));
    if (ready == 0 || deadline.expired()) {
      broken_ = true;  // a late answer would be taken for the next request's
      throw Error(Code::timeout, "bootstrap: the TCP store did not answer within " +
                                     std::to_string(timeout_.count()) + " ms (IBCOLL_TIMEOUT)");
    }
    char chunk[4096];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n <= 0) {
      throw Error(Code::peer_failed, "bootstrap: the TCP store closed the connection");
    }
    in_.append(chunk, static_cast<size_t>(n));
  }
  if (op == kRejected) {
    throw Error(Code::peer_failed,
                "bootstrap: the TCP store rejected this process (wrong IBCOLL_JOB_SECRET?)");
  }
  return body;
}

void TcpStore::set(const std::string& key, const std::string& value) {
  std::string body(4, '\0');
  const uint32_t key_length = static_cast<uint32_t>(key.size());
  std::memcpy(body.data(), &key_length, 4);
  request(kSet, body + key + value);
}

std::string TcpStore::get(const std::string& key) {
  request(kGet, key);
  return reply();
}

std::vector<std::string> TcpStore::allgather(const std::string& name, const std::string& mine) {
  set(name + "/" + std::to_string(rank_), mine);
  std::vector<std::string> all(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r)
    all[static_cast<size_t>(r)] = get(name + "/" + std::to_string(r));
  return all;
}

}  // namespace ibcoll::runtime
