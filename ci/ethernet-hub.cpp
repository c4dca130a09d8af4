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
//   ethernet-hub SOCKET [STATE]   (runs until killed; a port whose qemu exits is forgotten)
//
// STATE, rewritten every second: each port's frames in and out, the bytes queued for it, whether
// it is paused and for how long, its longest pause. ci/cluster-run prints it when a job fails, so
// a network that stopped moving shows where it stopped.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace {

constexpr size_t kHighWater = 256 << 10;  // bytes queued for one port before the hub pauses
constexpr size_t kMaxFrame = 65536 + 64;
constexpr size_t kMacBytes = 6;
using Clock = std::chrono::steady_clock;

struct Port {
  int fd;
  std::vector<uint8_t> in;   // bytes read, not yet a whole frame
  std::vector<uint8_t> out;  // framed bytes waiting for the socket
  size_t out_sent = 0;
  const Port* paused_by = nullptr;  // a full port this one's frames went to
  std::string mac;                  // the source address of its last frame
  uint64_t frames_in = 0, frames_out = 0;
  Clock::time_point paused_since{};
  Clock::duration longest_pause{};
};

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "ethernet-hub: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

class Hub {
 public:
  Hub(int listener, std::string state) : listener_(listener), state_(std::move(state)) {}

  void run() {
    auto reported = Clock::now();
    for (;;) {
      if (!state_.empty() && Clock::now() - reported >= std::chrono::seconds(1)) {
        reported = Clock::now();
        write_state();
      }
      std::vector<pollfd> fds{{listener_, POLLIN, 0}};
      for (const auto& port : ports_) {
        if (port->paused_by && pending(*port->paused_by) <= kHighWater) resume(*port);
        fds.push_back(
            {port->fd,
             static_cast<short>((port->paused_by ? 0 : POLLIN) | (pending(*port) ? POLLOUT : 0)),
             0});
      }
      if (poll(fds.data(), fds.size(), 1000) < 0) {
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

  static void pause(Port& port, const Port& full) {
    if (!port.paused_by) port.paused_since = Clock::now();
    port.paused_by = &full;
  }

  static void resume(Port& port) {
    port.longest_pause = std::max(port.longest_pause, Clock::now() - port.paused_since);
    port.paused_by = nullptr;
  }

  static std::string name(const Port& port) {
    if (port.mac.size() != kMacBytes) return "(silent, fd " + std::to_string(port.fd) + ")";
    char text[3 * kMacBytes];
    const auto* m = reinterpret_cast<const unsigned char*>(port.mac.data());
    std::snprintf(text, sizeof text, "%02x:%02x:%02x:%02x:%02x:%02x", m[0], m[1], m[2], m[3], m[4],
                  m[5]);
    return text;
  }

  static long long ms(Clock::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  }

  // Written beside and renamed over STATE, so a reader never sees half of it.
  void write_state() const {
    const std::string temporary = state_ + ".tmp";
    FILE* out = std::fopen(temporary.c_str(), "w");
    if (!out) return;
    std::fprintf(out, "ethernet-hub: %zu ports\n", ports_.size());
    for (const auto& port : ports_) {
      const std::string state =
          port->paused_by ? "paused " + std::to_string(ms(Clock::now() - port->paused_since)) +
                                " ms by " + name(*port->paused_by)
                          : "reading";
      std::fprintf(out,
                   "ethernet-hub: port %s: %llu frames in, %llu out, %zu bytes queued for it, "
                   "%s, longest pause %lld ms\n",
                   name(*port).c_str(), static_cast<unsigned long long>(port->frames_in),
                   static_cast<unsigned long long>(port->frames_out), pending(*port), state.c_str(),
                   ms(port->longest_pause));
    }
    std::fclose(out);
    std::rename(temporary.c_str(), state_.c_str());
  }

  void accept_port() {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;
    ports_.push_back(std::make_unique<Port>(Port{fd, {}, {}, 0}));
  }

  void forget(Port* gone) {
    close(gone->fd);
    std::erase_if(owner_, [gone](const auto& entry) { return entry.second == gone; });
    for (const auto& port : ports_)
      if (port->paused_by == gone) resume(*port);
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
    const std::string source(framed + 4 + kMacBytes, framed + 4 + 2 * kMacBytes);
    owner_[source] = &from;
    ++from.frames_in;
    from.mac = source;
    const auto known = owner_.find(destination);
    for (const auto& port : ports_) {
      const bool to_this = known != owner_.end() ? known->second == port.get() : true;
      if (port.get() == &from || !to_this) continue;
      port->out.insert(port->out.end(), framed, framed + bytes);
      ++port->frames_out;
      if (pending(*port) > kHighWater) pause(from, *port);
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
  std::string state_;  // the file the ports' state goes to, or empty
  std::vector<std::unique_ptr<Port>> ports_;
  std::map<std::string, Port*> owner_;  // source MAC → the port it was last seen on
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2 && argc != 3) {
    std::fprintf(stderr, "usage: %s SOCKET [STATE]\n", argv[0]);
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
  Hub(listener, argc == 3 ? argv[2] : "").run();
}
