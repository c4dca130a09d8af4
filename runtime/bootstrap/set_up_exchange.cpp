#include "runtime/bootstrap/set_up_exchange.h"

#include <unistd.h>

#include <climits>
#include <exception>
#include <new>

#include "base/status.h"
#include "runtime/set_up_records.h"

namespace ibcoll::runtime {
namespace {

std::string host_name() {
  char host[HOST_NAME_MAX + 1] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '?';
  return host;
}

}  // namespace

std::vector<std::string> exchange_set_up(Bootstrap& bootstrap, const std::string& name,
                                         FunctionRef<std::string()> step) {
  std::string mine;
  try {
    mine = ok_part(step());
  } catch (const Error& e) {
    mine = failed_part(e.status(), host_name());
  } catch (const std::bad_alloc&) {
    mine = failed_part(Status(Code::system_error, "out of memory"), host_name());
  } catch (const std::exception& e) {
    mine = failed_part(Status(Code::internal, e.what()), host_name());
  }
  return results_of_step(name, bootstrap.allgather(name, mine));
}

}  // namespace ibcoll::runtime
