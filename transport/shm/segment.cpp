#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "base/status.h"

namespace ibcoll::transport::shm {
namespace {

std::byte* map(int fd, size_t bytes, const std::string& name) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) throw_errno("mmap of shared segment " + name, errno);
  return static_cast<std::byte*>(data);
}

[[noreturn]] void no_room(int fd, int err, size_t bytes, const std::string& what) {
  struct statvfs fs {};
  const std::string room = fstatvfs(fd, &fs) == 0
                               ? ", " + std::to_string(fs.f_bavail * fs.f_frsize / 1024) +
                                     " KiB free of " +
                                     std::to_string(fs.f_blocks * fs.f_frsize / 1024)
                               : std::string();
  const bool full = err == ENOSPC || err == ENOMEM;
  throw Error(Code::system_error, "the node's shared memory (/dev/shm" + room + ") " +
                                      (full ? "has no room for " : "cannot give pages to ") + what +
                                      " (" + std::to_string((bytes + 1023) / 1024) +
                                      " KiB): " + std::strerror(err));
}

}  // namespace

SharedSegment SharedSegment::create(const std::string& name, size_t bytes) {
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) throw_errno("shm_open(" + name + ", create)", errno);
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int err = errno;
    close(fd);
    shm_unlink(name.c_str());
    throw_errno("ftruncate of shared segment " + name + " to " + std::to_string(bytes), err);
  }
  try {
    return SharedSegment(name, fd, map(fd, bytes, name), bytes);
  } catch (...) {
    close(fd);
    shm_unlink(name.c_str());
    throw;
  }
}

SharedSegment SharedSegment::open(const std::string& name, size_t bytes,
                                  std::chrono::milliseconds wait) {
  const Deadline deadline(wait);
  while (true) {
    const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
    struct stat info {};
    if (fd >= 0 && fstat(fd, &info) == 0 && static_cast<size_t>(info.st_size) == bytes) {
      try {
        return SharedSegment(name, fd, map(fd, bytes, name), bytes);
      } catch (...) {
        close(fd);
        throw;
      }
    }
    const int err = fd < 0 ? errno : EAGAIN;
    if (fd >= 0) close(fd);
    if (deadline.expired()) {
      throw Error(Code::timeout, "shared segment " + name + " was not ready within " +
                                     std::to_string(wait.count()) + " ms (errno " +
                                     std::to_string(err) + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

SharedSegment::SharedSegment(SharedSegment&& other) noexcept
    : name_(std::move(other.name_)), fd_(other.fd_), data_(other.data_), size_(other.size_) {
  other.fd_ = -1;
  other.data_ = nullptr;
}

SharedSegment::~SharedSegment() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
}

void SharedSegment::commit(const std::byte* begin, size_t bytes, const std::string& what) const {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t first = static_cast<size_t>(begin - data_) / page * page;
  const size_t end = std::min(size_, static_cast<size_t>(begin - data_) + bytes);
  int rc;
  do {
    rc = fallocate(fd_, 0, static_cast<off_t>(first), static_cast<off_t>(end - first));
  } while (rc != 0 && errno == EINTR);
  if (rc != 0 && errno != EOPNOTSUPP) no_room(fd_, errno, end - first, what);
  // Then faulted in: tmpfs takes back the pages a failed fallocate gave that nobody has touched
  // yet, in its whole range, which may share a page with one committed here (seen: a ring's
  // counters gone again, a SIGBUS at the next poll). A fault that finds no room is an error
  // here, not a SIGBUS.
  if (madvise(data_ + first, end - first, MADV_POPULATE_READ) != 0 && errno != EINVAL) {
    no_room(fd_, errno == EFAULT ? ENOSPC : errno, end - first, what);
  }
}

void SharedSegment::check_room(size_t bytes, const std::string& what) const {
  struct statvfs fs {};
  if (fstatvfs(fd_, &fs) == 0 && fs.f_bavail * fs.f_frsize < bytes)
    no_room(fd_, ENOSPC, bytes, what);
}

void SharedSegment::give_back(const std::byte* begin, size_t bytes) const {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const auto offset = static_cast<size_t>(begin - data_);
  const size_t first = (offset + page - 1) / page * page;
  const size_t end = std::min(size_, offset + bytes) / page * page;
  if (end <= first) return;
  if (fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(first),
                static_cast<off_t>(end - first)) != 0) {
    IBCOLL_LOG(debug, "the shared segment keeps " << (end - first) << " bytes: fallocate "
                                                  << "(FALLOC_FL_PUNCH_HOLE) failed, errno "
                                                  << errno);
  }
}

size_t SharedSegment::resident_bytes() const {
  // Not mincore: it does not see pages that were committed and not yet touched.
  struct stat info {};
  if (fstat(fd_, &info) != 0) throw_errno("fstat of shared segment " + name_, errno);
  return static_cast<size_t>(info.st_blocks) * 512;
}

void SharedSegment::unlink() {
  shm_unlink(name_.c_str());
}

}  // namespace ibcoll::transport::shm
