#include "transport/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>
#include <vector>

#include "base/status.h"

namespace ibcoll::transport::shm {
namespace {

std::byte* map(int fd, size_t bytes, const std::string& name) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) throw_errno("mmap of shared segment " + name, errno);
  return static_cast<std::byte*>(data);
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
    std::byte* data = map(fd, bytes, name);
    close(fd);
    return SharedSegment(name, data, bytes);
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
      std::byte* data = map(fd, bytes, name);
      close(fd);
      return SharedSegment(name, data, bytes);
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
    : name_(std::move(other.name_)), data_(other.data_), size_(other.size_) {
  other.data_ = nullptr;
}

SharedSegment::~SharedSegment() {
  if (data_) munmap(data_, size_);
}

size_t SharedSegment::resident_bytes() const {
  const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((size_ + page - 1) / page);
  if (mincore(data_, size_, resident.data()) != 0) throw_errno("mincore of shared segment", errno);
  size_t pages = 0;
  for (unsigned char r : resident)
    pages += r & 1;
  return pages * page;
}

void SharedSegment::unlink() {
  shm_unlink(name_.c_str());
}

}  // namespace ibcoll::transport::shm
