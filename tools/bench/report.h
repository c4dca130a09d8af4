// ibcoll_bench's output: the OSU-style table (with MPI's figures and the ratio beside ibcoll's
// when both ran), the CSV of every measurement, and an SVG plot of latency and bus bandwidth.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "tools/bench/sweep.h"

namespace ibcoll::bench {

// Prints one collective's table: `ours` and, if not empty, `theirs` at the same sizes.
void print_table(std::FILE* out, const std::vector<Measurement>& ours,
                 const std::vector<Measurement>& theirs);
void write_csv(const std::string& path, const std::vector<Measurement>& all);
// Two charts per collective (latency, bus bandwidth against size), a line per library.
void write_svg(const std::string& path, const std::vector<Measurement>& all);

std::string format_bytes(size_t bytes);

}  // namespace ibcoll::bench
