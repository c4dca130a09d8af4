#include "runtime/bootstrap/set_up_exchange.h"

#include <unistd.h>

#include <climits>
#include <exception>
#include <new>

#include "base/status.h"

namespace ibcoll::runtime {
namespace {

// Parts start with 'o' (then the step's result) or 'e', the code's number, ':' and the error.
std::string failure(const Status& status) {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '?';
  return "e" + std::to_string(static_cast<int>(status.code())) + ":host " + host + ": " +
         status.message();
}

}  // namespace

std::vector<std::string> exchange_set_up(Bootstrap& bootstrap, const std::string& name,
                                         FunctionRef<std::string()> step) {
  std::string mine;
  try {
    mine = "o" + step();
  } catch (const Error& e) {
    mine = failure(e.status());
  } catch (const std::bad_alloc&) {
    mine = failure(Status(Code::system_error, "out of memory"));
  } catch (const std::exception& e) {
    mine = failure(Status(Code::internal, e.what()));
  }
  std::vector<std::string> all = bootstrap.allgather(name, mine);
  for (size_t r = 0; r < all.size(); ++r) {
    const std::string& part = all[r];
    if (!part.empty() && part[0] == 'o') continue;
    const size_t colon = part.find(':');
    const int code = colon == std::string::npos ? 0 : std::atoi(part.substr(1, colon).c_str());
    throw Error(code > 0 && code <= static_cast<int>(Code::internal) ? static_cast<Code>(code)
                                                                     : Code::internal,
                "set-up (" + name + ") failed on rank " + std::to_string(r) + ", " +
                    (colon == std::string::npos ? part : part.substr(colon + 1)));
  }
  for (std::string& part : all)
    part.erase(0, 1);
  return all;
}

}  // namespace ibcoll::runtime
