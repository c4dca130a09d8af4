#include "tests/support/forked_ranks.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace ibcoll::testing {

void rank_check_failed(const char* condition, const char* file, int line,
                       const std::string& detail) {
  std::fprintf(stderr, "rank %s: check failed: %s at %s:%d: %s\n", std::getenv("IBCOLL_RANK"),
               condition, file, line, detail.c_str());
  std::fflush(stderr);
  _exit(1);
}

}  // namespace ibcoll::testing
