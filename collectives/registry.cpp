#include "collectives/registry.h"

#include <string>

#include "collectives/allreduce/recursive_doubling.h"
#include "collectives/bcast/binomial.h"

namespace ibcoll::collectives {
namespace {

const Algorithm kAlgorithms[] = {
    {Collective::allreduce, "recursive_doubling",
     "log2(p) whole-vector exchanges; non-powers of two fold in first (small messages)",
     make_recursive_doubling_allreduce},
    {Collective::bcast, "binomial", "binomial tree from the root, whole vector per edge",
     make_binomial_bcast},
};

}  // namespace

const char* collective_name(Collective collective) {
  switch (collective) {
    case Collective::allreduce:
      return "allreduce";
    case Collective::bcast:
      return "bcast";
  }
  return "unknown collective";
}

std::span<const Algorithm> algorithms() {
  return kAlgorithms;
}

const Algorithm& find_algorithm(Collective collective, std::string_view name) {
  std::string choices;
  for (const Algorithm& a : kAlgorithms) {
    if (a.collective != collective) continue;
    if (a.name == name) return a;
    choices += (choices.empty() ? "" : "|") + std::string(a.name);
  }
  throw Error(Code::invalid_argument, "algorithm: no " + std::string(collective_name(collective)) +
                                          " algorithm named '" + std::string(name) + "' (" +
                                          choices + ")");
}

}  // namespace ibcoll::collectives
