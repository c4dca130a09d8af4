// SharedSegment: a POSIX shared-memory segment (0600) mapped into this process. One local rank
// creates it, the others open it; once every local rank has mapped it, the creator unlinks the
// name, so nothing is left behind however the job ends. Its file is sparse: a part gets pages
// (commit) before anything touches it, since a touch of a page a full /dev/shm cannot give is
// a SIGBUS, where a commit that finds no room is an error naming /dev/shm.
#pragma once

#include <cstddef>
#include <string>

#include "base/deadline.h"

namespace ibcoll::transport::shm {

class SharedSegment {
 public:
  // Creates `name` (which must not exist) with `bytes` zeroed bytes.
  static SharedSegment create(const std::string& name, size_t bytes);
  // Opens an existing `name` of `bytes` bytes, waiting for its creator until the deadline.
  static SharedSegment open(const std::string& name, size_t bytes, std::chrono::milliseconds wait);

  SharedSegment(SharedSegment&& other) noexcept;
  SharedSegment& operator=(SharedSegment&&) = delete;
  SharedSegment(const SharedSegment&) = delete;
  ~SharedSegment();

  void unlink();  // removes the name; the mapping stays
  // Gives pages to the bytes [begin, begin + bytes) of the mapping, where it has none yet, and
  // maps them. Error(system_error) naming /dev/shm and `what` when the node's shared memory has
  // no room.
  void commit(const std::byte* begin, size_t bytes, const std::string& what) const;
  // The whole pages of [begin, begin + bytes) go back to the kernel (their bytes read as zeros
  // after): for parts nobody uses any more. Those at the edges stay, which a neighbour may share.
  void give_back(const std::byte* begin, size_t bytes) const;
  // Error(system_error) as commit's when the node's shared memory has fewer than `bytes` free:
  // for a part whose pages come at first touch (a touch of a page that does not come then is
  // still a SIGBUS, where others fill /dev/shm after the look).
  void check_room(size_t bytes, const std::string& what) const;
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // The bytes of it the kernel has given pages to (its file is sparse: a page exists once some
  // rank touched or committed it, and goes when given back): what /dev/shm is charged.
  size_t resident_bytes() const;

 private:
  SharedSegment(std::string name, int fd, std::byte* data, size_t size)
      : name_(std::move(name)), fd_(fd), data_(data), size_(size) {}

  std::string name_;
  int fd_ = -1;  // kept for commit
  std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ibcoll::transport::shm
