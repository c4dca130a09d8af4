#include "transport/verbs/xrc_domain.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "base/log.h"
#include "base/status.h"

namespace ibcoll::transport::verbs {

XrcDomain::~XrcDomain() {
  xrcd_.reset();
  ::close(fd_);
}

std::unique_ptr<XrcDomain> open_xrc_domain(const Device& device, XrcMode mode,
                                           const std::string& file) {
  if (mode == XrcMode::off) return nullptr;
  const std::string path = file.empty() ? "/tmp/ibcoll-xrcd-" + std::to_string(getuid()) : file;
  int fd = ::open(path.c_str(), O_RDONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno("open of the XRC domain file " + path, errno);

  ibv_xrcd_init_attr attr{};
  attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  attr.fd = fd;
  attr.oflags = O_CREAT;
  XrcDomainHandle xrcd(ibv_open_xrcd(device.context(), &attr));
  if (xrcd) {
    ++live_objects().xrcds;
    return std::make_unique<XrcDomain>(std::move(xrcd), fd);
  }
  const int err = errno;
  ::close(fd);
  const std::string why = "ibv_open_xrcd on " + device.name() + ": " + std::strerror(err) +
                          " (errno " + std::to_string(err) + ")";
  if (mode == XrcMode::on) {
    throw Error(Code::not_supported,
                "IBCOLL_XRC=on but " + device.name() + " cannot open an XRC domain: " + why);
  }
  IBCOLL_LOG(info, "XRC unavailable (" << why << "); using per-peer RC QPs on one shared SRQ");
  return nullptr;
}

}  // namespace ibcoll::transport::verbs
