#include "transport/verbs/xrc_domain.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "base/log.h"
#include "base/status.h"

namespace ibcoll::transport::verbs {
namespace {

// Makes `dir` (0700) if missing; throws unless it is a directory, not a link, owned by this
// user and closed to everyone else.
void require_private_directory(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    throw_errno("mkdir of the XRC domain directory " + dir, errno);
  }
  struct stat info {};
  if (::lstat(dir.c_str(), &info) != 0) throw_errno("lstat of " + dir, errno);
  if (!S_ISDIR(info.st_mode) || info.st_uid != ::geteuid() || (info.st_mode & 077) != 0) {
    throw Error(Code::system_error,
                "the XRC domain directory " + dir +
                    " is not private (it must be a directory, not a link, owned by this user, "
                    "mode 0700; IBCOLL_XRC_DIR names another)");
  }
}

}  // namespace

XrcDomain::XrcDomain(const Device& device, const std::string& path) : path_(path) {
  const size_t slash = path.rfind('/');
  if (path.empty() || slash == std::string::npos || slash == 0) {
    throw Error(Code::invalid_argument, "XRC domain file: '" + path + "' is not an absolute path");
  }
  require_private_directory(path.substr(0, slash));
  fd_ = ::open(path.c_str(), O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd_ < 0) throw_errno("open of the XRC domain file " + path, errno);
  ibv_xrcd_init_attr attr{};
  attr.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  attr.fd = fd_;
  attr.oflags = O_CREAT;
  xrcd_.reset(ibv_open_xrcd(device.context(), &attr));
  if (!xrcd_) {
    const int err = errno;
    ::close(fd_);
    ::unlink(path_.c_str());
    throw Error(err == EOPNOTSUPP || err == ENOSYS ? Code::not_supported : Code::system_error,
                "ibv_open_xrcd on " + device.name() + ": " + std::strerror(err) + " (errno " +
                    std::to_string(err) + ")");
  }
  ++live_objects().xrcds;
  if (!(device.attr().device_cap_flags & IBV_DEVICE_XRC)) {
    xrcd_.reset();
    ::close(fd_);
    ::unlink(path_.c_str());
    throw Error(Code::not_supported, "ibv_open_xrcd on " + device.name() +
                                         " worked, but it reports no XRC (IBV_DEVICE_XRC)");
  }
}

XrcDomain::~XrcDomain() {
  xrcd_.reset();
  ::close(fd_);
  unlink_file();  // a channel that never had its peers' addresses: set-up failed or fell back
}

void XrcDomain::unlink_file() {
  if (!std::exchange(linked_, false)) return;
  if (::unlink(path_.c_str()) != 0 && errno != ENOENT) {  // a node-mate may have been first
    IBCOLL_LOG(warn, "unlink of the XRC domain file " << path_ << ": " << std::strerror(errno));
  }
}

std::unique_ptr<XrcDomain> open_xrc_domain(const Device& device, XrcMode mode,
                                           const std::string& path) {
  if (mode == XrcMode::off) return nullptr;
  try {
    return std::make_unique<XrcDomain>(device, path);
  } catch (const Error& e) {
    if (mode == XrcMode::on) {
      throw Error(Code::not_supported, "IBCOLL_XRC=on but " + device.name() +
                                           " gets no XRC domain: " + e.status().message());
    }
    IBCOLL_LOG(info, "XRC unavailable (" << e.status().message()
                                         << "); using per-peer RC QPs on one shared SRQ");
    return nullptr;
  }
}

}  // namespace ibcoll::transport::verbs
