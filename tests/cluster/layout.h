// A job's layout as ci/cluster-run places it: ranks per node, node by node ("2,2,1").
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace ibcoll::testing {

inline std::vector<int> parse_layout(const char* text) {
  std::vector<int> counts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');)
    counts.push_back(std::stoi(part));
  return counts;
}

}  // namespace ibcoll::testing
