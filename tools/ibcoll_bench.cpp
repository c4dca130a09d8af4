// ibcoll_bench: OSU-style latency and bandwidth of allreduce and bcast over a size sweep, the
// main benchmark of ibcoll. Alone it forks its own ranks on this machine (one per core, or
// --np); under mpirun it uses the launcher's ranks, and with --compare-mpi it times the MPI
// library's MPI_Allreduce / MPI_Bcast in the same run, size by size, and prints the ratio.
// Rank 0 prints the tables and writes PREFIX.csv and PREFIX.svg.
//
//   ibcoll_bench [--np N] [--collectives allreduce,bcast] [--min-size 4] [--max-size 16M]
//                [--rounds 5] [--iters N] [--pipelined] [--compare-mpi] [--out PREFIX]
// Each call is timed alone between barriers, as OSU does; --pipelined times back-to-back calls.
#include <unistd.h>
#include <algorithm>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ibcoll/ibcoll.h"
#include "runtime/bootstrap/local_launch.h"
#include "runtime/config.h"
#include "tools/bench/report.h"
#ifdef IBCOLL_BENCH_MPI
#include <mpi.h>
#endif

namespace {

using namespace ibcoll::bench;

struct Options {
  int ranks = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  std::vector<Collective> collectives{Collective::allreduce, Collective::bcast};
  size_t min_size = 4, max_size = size_t{16} << 20;
  Settings settings;
  bool compare_mpi = false;
  std::string out = "ibcoll_bench";
};

constexpr const char* kUsage =
    "usage: ibcoll_bench [OPTION]...\n"
    "Latency and bandwidth of allreduce (float32 sum) and bcast (from rank 0) over a size sweep,\n"
    "OSU style: each call timed alone between barriers; the median over rounds of the mean per\n"
    "call. Alone it forks its ranks here; under mpirun (or srun) it uses the launcher's. Rank 0\n"
    "prints a table per collective and writes PREFIX.csv and PREFIX.svg; one call per size is\n"
    "checked for the right result (exit 1 if any is wrong).\n"
    "\n"
    "  --np N              ranks to fork when run alone (default: the online cores)\n"
    "  --collectives LIST  allreduce, bcast or both, comma-separated (default: both)\n"
    "  --min-size BYTES    smallest size per rank (default 4; k, M, G suffixes)\n"
    "  --max-size BYTES    largest size per rank, doubling from the smallest (default 16M)\n"
    "  --rounds N          rounds per size; the median round counts (default 5)\n"
    "  --iters N           calls per round (default: by size, 1000 down to 10)\n"
    "  --pipelined         time back-to-back calls as one loop instead of each alone\n"
    "  --compare-mpi       under mpirun: time MPI_Allreduce/MPI_Bcast too, with the ratio\n"
    "  --out PREFIX        output files PREFIX.csv and PREFIX.svg (default ibcoll_bench)\n"
    "  --help              this text\n"
    "\n"
    "IBCOLL_* variables configure ibcoll itself (ibcoll_info lists them).\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "ibcoll_bench: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    if (flag == "--compare-mpi" || flag == "--pipelined") {
      (flag == "--compare-mpi" ? o.compare_mpi : o.settings.pipelined) = true;
      continue;
    }
    if (i + 1 >= argc) usage(flag + " needs a value");
    const std::string value = argv[++i];
    try {
      if (flag == "--np") {
        o.ranks = static_cast<int>(ibcoll::runtime::parse_integer("--np", value, 1, 1024));
      } else if (flag == "--collectives") {
        o.collectives.clear();
        for (size_t at = 0; at <= value.size();) {
          const size_t end = std::min(value.find(',', at), value.size());
          const std::string name = value.substr(at, end - at);
          if (name == "allreduce")
            o.collectives.push_back(Collective::allreduce);
          else if (name == "bcast")
            o.collectives.push_back(Collective::bcast);
          else
            usage("--collectives: '" + name + "' is not allreduce or bcast");
          at = end + 1;
        }
      } else if (flag == "--min-size") {
        o.min_size = ibcoll::runtime::parse_size("--min-size", value);
      } else if (flag == "--max-size") {
        o.max_size = ibcoll::runtime::parse_size("--max-size", value);
      } else if (flag == "--rounds") {
        o.settings.rounds =
            static_cast<int>(ibcoll::runtime::parse_integer(flag.c_str(), value, 1, 1000));
      } else if (flag == "--iters") {
        o.settings.iterations =
            static_cast<int>(ibcoll::runtime::parse_integer(flag.c_str(), value, 1, 1000000));
      } else if (flag == "--out") {
        o.out = value;
      } else {
        usage("unknown option " + flag);
      }
    } catch (const std::exception& e) {
      usage(e.what());
    }
  }
  if (o.min_size < 4 || o.min_size > o.max_size) usage("sizes: need 4 <= --min-size <= --max-size");
  for (size_t s = o.min_size; s <= o.max_size; s *= 2)
    o.settings.sizes.push_back(s / 4 * 4);
  return o;
}

// Started by an MPI launcher (mpirun, srun): MPI_Init finds the job.
bool under_mpi_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    if (std::getenv(name)) return true;
  }
  return false;
}

// Started by a launcher: an MPI one, or one that sets IBCOLL_RANK and IBCOLL_SIZE.
bool under_launcher() {
  return std::getenv("IBCOLL_RANK") || under_mpi_launcher();
}

// What the header says about the run.
std::string describe_run(Subject& ours, bool forked) {
  std::string text = std::to_string(ours.size()) + " ranks (" +
                     (forked ? "forked by ibcoll_bench" : "from the launcher") + ")";
  if (ours.size() > 1) text += "; rank 0 reaches rank 1 by " + ours.transport_to(1);
  return text;
}

// Sweeps every collective, ibcoll and (when given) MPI size by size in turn, so both see the
// same machine conditions; rank 0 prints and writes the results.
int run(const Options& o, Subject& ours, Subject* theirs, bool forked) {
  const bool printer = ours.rank() == 0;
  const bool tty = printer && isatty(STDERR_FILENO);
  if (printer) {
    std::printf("# ibcoll_bench: %s; %s; IBCOLL_CHECK_CALLS=%s\n",
                describe_run(ours, forked).c_str(),
                o.settings.pipelined ? "back-to-back calls timed as a loop (--pipelined)"
                                     : "each call timed alone between barriers (OSU)",
                std::getenv("IBCOLL_CHECK_CALLS") ? std::getenv("IBCOLL_CHECK_CALLS") : "1");
    const std::string thresholds = ours.thresholds();
    for (size_t at = 0, end; at < thresholds.size(); at = end + 1) {
      end = std::min(thresholds.find('\n', at), thresholds.size());
      std::printf("# %s\n", thresholds.substr(at, end - at).c_str());
    }
  }
  std::vector<Measurement> all;
  for (Collective collective : o.collectives) {
    std::vector<Measurement> mine, mpi;
    for (size_t bytes : o.settings.sizes) {
      Settings one = o.settings;
      one.sizes = {bytes};
      auto show = [&](const Measurement& m) {
        if (tty) {
          std::fprintf(stderr, "\r%-9s %-6s %10s: %10.2f us   ", collective_name(collective),
                       m.library.c_str(), format_bytes(m.bytes).c_str(), m.avg_us);
        }
      };
      Subject& separator = theirs ? *theirs : ours;
      for (const Measurement& m : sweep(ours, separator, collective, one, show))
        mine.push_back(m);
      if (theirs) {
        for (const Measurement& m : sweep(*theirs, separator, collective, one, show))
          mpi.push_back(m);
      }
    }
    if (tty) std::fprintf(stderr, "\r%60s\r", "");
    if (printer) print_table(stdout, mine, mpi);
    all.insert(all.end(), mine.begin(), mine.end());
    all.insert(all.end(), mpi.begin(), mpi.end());
  }
  if (printer) {
    write_csv(o.out + ".csv", all);
    write_svg(o.out + ".svg", all);
    std::printf("\n# wrote %s.csv and %s.svg\n", o.out.c_str(), o.out.c_str());
  }
  const bool all_right =
      std::all_of(all.begin(), all.end(), [](const Measurement& m) { return m.correct; });
  if (!all_right && printer)
    std::fprintf(stderr, "ibcoll_bench: a checked call gave a wrong result\n");
  return all_right ? 0 : 1;
}

#ifdef IBCOLL_BENCH_MPI
// Under mpirun ibcoll bootstraps through MPI (ibcoll_init_with over MPI_Allgather), so the job
// may span nodes and needs no TCP store.
int mpi_allgather(const void* mine, void* all, size_t bytes, void*) {
  const int count = static_cast<int>(bytes);
  return MPI_Allgather(mine, count, MPI_BYTE, all, count, MPI_BYTE, MPI_COMM_WORLD) != MPI_SUCCESS;
}

int run_under_mpi(const Options& o) {
  MPI_Init(nullptr, nullptr);
  int code = 1;
  try {
    ibcoll_bootstrap_t bootstrap{0, 1, mpi_allgather, nullptr};
    MPI_Comm_rank(MPI_COMM_WORLD, &bootstrap.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &bootstrap.size);
    auto ours = make_ibcoll_subject(&bootstrap);
    auto theirs = o.compare_mpi ? make_mpi_subject() : nullptr;
    code = run(o, *ours, theirs.get(), false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcoll_bench: %s\n", e.what());
  }
  MPI_Finalize();
  return code;
}
#endif

// Under a launcher that only says IBCOLL_RANK and IBCOLL_SIZE (ci/cluster-run), ibcoll's own
// bootstrap finds the job; MPI_Init there would make every rank a job of one.
int run_under_launcher(const Options& o) {
#ifdef IBCOLL_BENCH_MPI
  if (under_mpi_launcher()) return run_under_mpi(o);
#endif
  try {
    return run(o, *make_ibcoll_subject(), nullptr, false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ibcoll_bench: %s\n", e.what());
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
#ifdef IBCOLL_BENCH_MPI
  const bool mpi = under_mpi_launcher();
#else
  const bool mpi = false;  // this build cannot time MPI's collectives
#endif
  if (o.compare_mpi && !mpi)
    usage("--compare-mpi needs mpirun (mpirun -np 2 ibcoll_bench --compare-mpi)");
  if (under_launcher()) return run_under_launcher(o);
  ibcoll::runtime::LaunchOptions launch;
  launch.deadline = std::chrono::seconds(3600);
  const auto exits = ibcoll::runtime::launch_local_ranks(
      o.ranks,
      [&](int, int) {
        try {
          return run(o, *make_ibcoll_subject(), nullptr, true);
        } catch (const std::exception& e) {
          std::fprintf(stderr, "ibcoll_bench: %s\n", e.what());
          return 1;
        }
      },
      launch);
  for (const auto& e : exits) {
    if (!e.ok()) {
      std::fprintf(stderr, "ibcoll_bench: %s\n", ibcoll::runtime::describe(exits).c_str());
      return 1;
    }
  }
  return 0;
}
