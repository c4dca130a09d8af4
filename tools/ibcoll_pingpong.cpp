// ibcoll_pingpong: latency (ping-pong, half the round trip) and streaming bandwidth between two
// ranks over ibcoll's verbs transport. Run under a launcher with 2 ranks, or alone: it then
// forks its own 2 ranks. Rank 0 prints the table (and CSV with --csv).
//
//   ibcoll_pingpong [--mode lat|bw|both] [--sizes 8,1024,...] [--iters N] [--window W] [--csv F]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/status.h"
#include "runtime/bootstrap/local_launch.h"
#include "runtime/verbs_endpoint.h"

namespace {

using namespace ibcoll;
using Clock = std::chrono::steady_clock;

struct Args {
  bool latency = true, bandwidth = true;
  std::vector<size_t> lat_sizes{1, 8, 64, 512, 4096, 8192, 65536};
  std::vector<size_t> bw_sizes{65536, 262144, 1 << 20, 4 << 20};
  int iters = 1000;
  int bw_rounds = 20;
  int window = 16;
  std::string csv;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "ibcoll_pingpong: %s\nusage: ibcoll_pingpong [--mode lat|bw|both] "
               "[--sizes N,N,...] [--iters N] [--rounds N] [--window N] [--csv FILE]\n",
               why.c_str());
  std::exit(2);
}

long number(const std::string& flag, const char* text, long min) {
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < min) usage(flag + ": bad value '" + text + "'");
  return value;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) usage(flag + " needs a value");
    const char* value = argv[++i];
    if (flag == "--mode") {
      const std::string m = value;
      if (m != "lat" && m != "bw" && m != "both") usage("--mode: lat, bw or both");
      a.latency = m != "bw";
      a.bandwidth = m != "lat";
    } else if (flag == "--sizes") {
      std::vector<size_t> sizes;
      for (const char* p = value; *p;) {
        const char* comma = std::strchr(p, ',');
        const std::string item = comma ? std::string(p, comma) : std::string(p);
        sizes.push_back(static_cast<size_t>(number("--sizes", item.c_str(), 0)));
        p = comma ? comma + 1 : p + item.size();
      }
      a.lat_sizes = a.bw_sizes = sizes;
    } else if (flag == "--iters") {
      a.iters = static_cast<int>(number(flag, value, 1));
    } else if (flag == "--rounds") {
      a.bw_rounds = static_cast<int>(number(flag, value, 1));
    } else if (flag == "--window") {
      a.window = static_cast<int>(number(flag, value, 1));
    } else if (flag == "--csv") {
      a.csv = value;
    } else {
      usage("unknown option " + flag);
    }
  }
  return a;
}

// Blocks until the operation's completion ran; turns an error status into an exception.
struct Waiter {
  runtime::VerbsEndpoint& ep;
  int pending = 0;
  Status failure;
  transport::Completion completion() {
    ++pending;
    return [this](const Status& s, size_t) {
      --pending;
      if (!s.ok()) failure = s;
    };
  }
  void wait(const char* what) {
    ep.wait([&] { return pending == 0; }, what);
    if (!failure.ok()) throw Error(failure);
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int run(const Args& a) {
  runtime::VerbsEndpoint ep;
  if (ep.size() != 2) throw Error(Code::invalid_argument, "ibcoll_pingpong needs exactly 2 ranks");
  const int me = ep.rank(), peer = 1 - me;
  auto& ch = ep.channel();
  Waiter w{ep, 0, {}};
  FILE* csv = nullptr;
  if (me == 0 && !a.csv.empty()) {
    csv = std::fopen(a.csv.c_str(), "w");
    if (!csv) throw Error(Code::invalid_argument, "--csv: cannot write " + a.csv);
    std::fprintf(csv, "test,bytes,median_us,min_us,mib_per_s\n");
  }

  if (a.latency) {
    if (me == 0)
      std::printf(
          "# ibcoll verbs ping-pong latency (one way = round trip / 2)\n"
          "%10s %12s %12s %12s\n",
          "bytes", "median_us", "min_us", "avg_us");
    for (size_t bytes : a.lat_sizes) {
      std::vector<std::byte> out(bytes, std::byte{1}), in(bytes);
      const int warmup = std::max(10, a.iters / 10);
      std::vector<double> samples;
      // Receives are posted before the message they wait for can arrive, as a tuned
      // application (and perftest) does; rank 1 keeps the next ping's receive posted.
      Waiter ping{ep, 0, {}};
      if (me == 1) ch.recv(peer, 1, in.data(), bytes, ping.completion());
      // Samples are batches of kBatch round trips: reading the clock is slow under emulation.
      constexpr int kBatch = 10;
      auto t0 = Clock::now();
      for (int i = -warmup; i < a.iters; ++i) {
        if (i == 0) t0 = Clock::now();
        if (me == 0) {
          ch.recv(peer, 2, in.data(), bytes, w.completion());
          ch.send(peer, 1, out.data(), bytes, w.completion());
        } else {
          ping.wait("ping");
          if (i + 1 < a.iters) ch.recv(peer, 1, in.data(), bytes, ping.completion());
          ch.send(peer, 2, out.data(), bytes, w.completion());
        }
        w.wait("ping-pong");
        if (i >= 0 && (i + 1) % kBatch == 0) {
          const auto t1 = Clock::now();
          samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() /
                            (2 * kBatch));
          t0 = t1;
        }
      }
      if (me == 0) {
        double sum = 0;
        for (double s : samples)
          sum += s;
        const double med = median(samples), lo = *std::min_element(samples.begin(), samples.end());
        std::printf("%10zu %12.2f %12.2f %12.2f\n", bytes, med, lo, sum / samples.size());
        if (csv) std::fprintf(csv, "latency,%zu,%.3f,%.3f,\n", bytes, med, lo);
      }
    }
  }

  if (a.bandwidth) {
    if (me == 0)
      std::printf("# ibcoll verbs streaming bandwidth (window %d)\n%10s %12s\n", a.window, "bytes",
                  "MiB/s");
    for (size_t bytes : a.bw_sizes) {
      std::vector<std::byte> buffers(bytes * a.window, std::byte{2});
      char ack = 0;
      const auto round = [&] {
        for (int k = 0; k < a.window; ++k) {
          std::byte* b = buffers.data() + bytes * k;
          if (me == 0)
            ch.send(peer, 3, b, bytes, w.completion());
          else
            ch.recv(peer, 3, b, bytes, w.completion());
        }
        w.wait("bandwidth window");
      };
      round();  // warm-up: connections and registrations
      const auto t0 = Clock::now();
      for (int r = 0; r < a.bw_rounds; ++r)
        round();
      if (me == 0)
        ch.recv(peer, 4, &ack, 1, w.completion());
      else
        ch.send(peer, 4, &ack, 1, w.completion());
      w.wait("bandwidth ack");
      const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      const double mib = double(bytes) * a.window * a.bw_rounds / (1 << 20) / seconds;
      if (me == 0) {
        std::printf("%10zu %12.1f\n", bytes, mib);
        if (csv) std::fprintf(csv, "bandwidth,%zu,,,%.2f\n", bytes, mib);
      }
    }
  }
  if (csv) std::fclose(csv);
  if (me == 0) {
    const auto c = ch.counters();
    std::printf(
        "# rank 0 counters: %llu connection(s), %llu SRQ of %llu buffers, %llu messages "
        "sent, %llu received, %llu rendezvous, %llu credit stalls, %llu handshake "
        "retries\n",
        static_cast<unsigned long long>(c.connections),
        static_cast<unsigned long long>(c.shared_receive_queues),
        static_cast<unsigned long long>(c.srq_depth),
        static_cast<unsigned long long>(c.messages_sent),
        static_cast<unsigned long long>(c.messages_received),
        static_cast<unsigned long long>(c.rendezvous_sent),
        static_cast<unsigned long long>(c.credit_stalls),
        static_cast<unsigned long long>(c.handshake_retries));
  }
  std::fflush(stdout);
  ep.bootstrap().barrier("pingpong-end");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse(argc, argv);
  auto guarded = [&](int, int) {
    try {
      return run(args);
    } catch (const ibcoll::Error& e) {
      std::fprintf(stderr, "ibcoll_pingpong: %s\n", e.what());
      return 1;
    }
  };
  const bool launched = std::getenv("IBCOLL_RANK") || std::getenv("OMPI_COMM_WORLD_RANK") ||
                        std::getenv("PMI_RANK") || std::getenv("SLURM_PROCID");
  if (launched) return guarded(0, 0);
  auto exits = ibcoll::runtime::launch_local_ranks(2, guarded, {std::chrono::seconds(600), {}});
  for (const auto& e : exits) {
    if (!e.ok()) {
      std::fprintf(stderr, "ibcoll_pingpong: %s\n", ibcoll::runtime::describe(exits).c_str());
      return 1;
    }
  }
  return 0;
}
