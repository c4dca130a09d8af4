// ci/ethernet-hub: the switch of ci/rxe-cluster's virtual network. Each guest's qemu connects to
// SOCKET with `-netdev stream` (frames as a 4-byte big-endian length, then the Ethernet frame);
// frames go to the port that last sent from their destination MAC, or to every other port when
// that is unknown (broadcast, multicast, not yet learned).
//
// Lossless, as RoCE fabrics are made with pause frames: a port whose last frame went to a port
// with more than kHighWater bytes waiting is not read until that port drains, so qemu's stream
// backs up into the sending guest (its virtio queue, then its qdisc, then rxe, which waits). A
// datagram network loses whatever a busy guest cannot take in time, and each loss stalls an RC QP
// for an ACK timeout.
//
//   ethernet-hub SOCKET     (runs until killed; a port whose qemu exits is forgotten)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace {

constexpr size_t kHighWater = 256 << 10;  // bytes queued for one port before the hub pauses
constexpr size_t kMaxFrame = 65536 + 64;
constexpr size_t kMacBytes = 6;

struct Port {
  int fd;
  std::vector<uint8_t> in;   // bytes read, not yet a whole frame
  std::vector<uint8_t> out;  // framed bytes waiting for the socket
  size_t out_sent = 0;
  const Port* paused_by = nullptr;  // a full port this one's frames went to
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "ethernet-hub: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

class Hub {
 public:
  explicit Hub(int listener) : listener_(listener) {}

  void run() {
    for (;;) {
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const auto& port : ports_) {
        if (port->paused_by && pending(*port->paused_by) <= kHighWater) port->paused_by = nullptr;
        fds.push_back(
            {port->fd,
             static_cast<short>((port->paused_by ? 0 : POLLIN) | (pending(*port) ? POLLOUT : 0)),
             0});
      }
      if (poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        fail("poll");
      }
      std::vector<Port*> closed;
      for (size_t i = 1; i < fds.size(); ++i) {
        Port& port = *ports_[i - 1];
        const bool ok = (!(fds[i].revents & POLLOUT) || flush(port)) &&
                        (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR)) || receive(port));
        if (!ok) closed.push_back(&port);
      }
      for (Port* port : closed)
        forget(port);
      if (fds[0].revents & POLLIN) accept_port();
    }
  }

 private:
  static size_t pending(const Port& port) { return port.out.size() - port.out_sent; }

  void accept_port() {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ports_.push_back(std::make_unique<Port>(Port{fd, {}, {}, 0}));
  }

  void forget(Port* gone) {
    close(gone->fd);
    std::erase_if(owner_, [gone](const auto& entry) { return entry.second == gone; });
    for (const auto& port : ports_)
      if (port->paused_by == gone) port->paused_by = nullptr;
    std::erase_if(ports_, [gone](const auto& port) { return port.get() == gone; });
  }

  // Reads what the socket has and forwards every whole frame; false when the port is gone.
  bool receive(Port& port) {
    if (port.paused_by) return true;  // a hang-up is seen once it may read again
    uint8_t chunk[64 << 10];
    const ssize_t n = read(port.fd, chunk, sizeof chunk);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return false;
    if (n < 0) return true;
    port.in.insert(port.in.end(), chunk, chunk + n);
    size_t at = 0;
    while (port.in.size() - at >= 4) {
      const uint8_t* p = port.in.data() + at;
      const size_t length = size_t{p[0]} << 24 | size_t{p[1]} << 16 | size_t{p[2]} << 8 | p[3];
      if (length > kMaxFrame) return false;  // not qemu's framing: drop the port
      if (port.in.size() - at < 4 + length) break;
      forward(port, p, 4 + length);
      at += 4 + length;
    }
    port.in.erase(port.in.begin(), port.in.begin() + static_cast<std::ptrdiff_t>(at));
    return true;
  }

  void forward(Port& from, const uint8_t* framed, size_t bytes) {
    if (bytes < 4 + 2 * kMacBytes) return;
    const std::string destination(framed + 4, framed + 4 + kMacBytes);
    owner_[std::string(framed + 4 + kMacBytes, framed + 4 + 2 * kMacBytes)] = &from;
    const auto known = owner_.find(destination);
    for (const auto& port : ports_) {
      const bool to_this = known != owner_.end() ? known->second == port.get() : true;
      if (port.get() == &from || !to_this) continue;
      port->out.insert(port->out.end(), framed, framed + bytes);
      if (pending(*port) > kHighWater) from.paused_by = port.get();
    }
  }

  // Writes what the socket takes; false when the port is gone.
  bool flush(Port& port) {
    while (pending(port) > 0) {
      const ssize_t n = write(port.fd, port.out.data() + port.out_sent, pending(port));
      if (n < 0) return errno == EAGAIN || errno == EINTR;
      port.out_sent += static_cast<size_t>(n);
    }
    port.out.clear();
    port.out_sent = 0;
    return true;
  }

  int listener_;
  std::vector<std::unique_ptr<Port>> ports_;
  std::map<std::string, Port*> owner_;  // source MAC → the port it was last seen on
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s SOCKET\n", argv[0]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (std::strlen(argv[1]) >= sizeof address.sun_path) {
    std::fprintf(stderr, "ethernet-hub: socket path too long: %s\n", argv[1]);
    return 2;
  }
  std::strcpy(address.sun_path, argv[1]);
  const int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener < 0) fail("socket");
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) < 0) fail(argv[1]);
  if (listen(listener, 16) < 0) fail("listen");
  Hub(listener).run();
}
