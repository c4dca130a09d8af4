// ibcoll.hpp: a thin C++ layer over ibcoll.h. Owners that free what they hold (context,
// communicators from split/create, requests), failures as ibcoll::api::Error (status and
// message), and element types deduced from std::span. Header-only; everything goes through
// the C API.
#ifndef IBCOLL_IBCOLL_HPP
#define IBCOLL_IBCOLL_HPP

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ibcoll/ibcoll.h"

namespace ibcoll::api {

class Error : public std::runtime_error {
 public:
  Error(ibcoll_status_t status, const std::string& message)
      : std::runtime_error(std::string(ibcoll_status_name(status)) + ": " + message),
        status_(status) {}
  ibcoll_status_t status() const { return status_; }

 private:
  ibcoll_status_t status_;
};

inline void check(ibcoll_status_t status) {
  if (status != IBCOLL_SUCCESS) throw Error(status, ibcoll_last_error());
}

// The ibcoll type of a C++ element type (16-bit floats have no C++ type here: pass the type).
template <typename T>
constexpr ibcoll_datatype_t datatype_of() {
  if constexpr (std::is_same_v<T, int8_t>)
    return IBCOLL_INT8;
  else if constexpr (std::is_same_v<T, int16_t>)
    return IBCOLL_INT16;
  else if constexpr (std::is_same_v<T, int32_t>)
    return IBCOLL_INT32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return IBCOLL_INT64;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return IBCOLL_UINT8;
  else if constexpr (std::is_same_v<T, uint16_t>)
    return IBCOLL_UINT16;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return IBCOLL_UINT32;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return IBCOLL_UINT64;
  else if constexpr (std::is_same_v<T, float>)
    return IBCOLL_FLOAT32;
  else if constexpr (std::is_same_v<T, double>)
    return IBCOLL_FLOAT64;
  else
    static_assert(sizeof(T) == 0, "no ibcoll type for this element type");
}

// A non-blocking call; the destructor waits for it (errors then are dropped: call wait()).
class Request {
 public:
  explicit Request(ibcoll_request_t handle) : handle_(handle) {}
  Request(Request&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Request& operator=(Request&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  ~Request() {
    if (handle_) ibcoll_request_free(&handle_);
  }
  void wait() { check(ibcoll_wait(handle_)); }
  bool test() {
    int done = 0;
    check(ibcoll_test(handle_, &done));
    return done != 0;
  }

 private:
  ibcoll_request_t handle_;
};

class Communicator {
 public:
  // Wraps `handle`; `owned` ones are freed on destruction (not the world).
  Communicator(ibcoll_comm_t handle, bool owned) : handle_(handle), owned_(owned) {}
  Communicator(Communicator&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)), owned_(other.owned_) {}
  Communicator& operator=(Communicator&& other) noexcept {
    std::swap(handle_, other.handle_);
    std::swap(owned_, other.owned_);
    return *this;
  }
  ~Communicator() {
    if (handle_ && owned_) ibcoll_comm_free(&handle_);
  }

  explicit operator bool() const { return handle_ != nullptr; }  // false: not a member
  ibcoll_comm_t handle() const { return handle_; }
  int rank() const {
    int r = -1;
    check(ibcoll_comm_rank(handle_, &r));
    return r;
  }
  int size() const {
    int s = 0;
    check(ibcoll_comm_size(handle_, &s));
    return s;
  }
  // Collective: color IBCOLL_UNDEFINED gives an empty communicator.
  Communicator split(int color, int key) const {
    ibcoll_comm_t out = nullptr;
    check(ibcoll_comm_split(handle_, color, key, &out));
    return Communicator(out, true);
  }
  Communicator create(std::span<const int> ranks) const {
    ibcoll_comm_t out = nullptr;
    check(ibcoll_comm_create(handle_, ranks.data(), static_cast<int>(ranks.size()), &out));
    return Communicator(out, true);
  }
  // Not collective: every member's calls on it fail with IBCOLL_ERR_REVOKED (ibcoll_comm_revoke).
  void revoke() const { check(ibcoll_comm_revoke(handle_)); }
  // Collective over the live members, whatever fails (ibcoll_comm_agree): the AND of every
  // member's flags, with failed_ranks() telling who failed; Error only where this rank cannot
  // take part (fenced out, a member's other call), not for members that failed.
  int agree(int flags) const {
    const ibcoll_status_t status = ibcoll_comm_agree(handle_, &flags);
    if (status != IBCOLL_ERR_PEER_FAILED) check(status);
    return flags;
  }
  // The members the last agreement held failed (ibcoll_comm_failed_ranks), in order.
  std::vector<int> failed_ranks() const {
    int count = 0;
    check(ibcoll_comm_failed_ranks(handle_, nullptr, 0, &count));
    std::vector<int> ranks(static_cast<size_t>(count));
    check(ibcoll_comm_failed_ranks(handle_, ranks.data(), count, &count));
    return ranks;
  }
  // Collective over the live members (ibcoll_comm_shrink): a communicator of those that did
  // not fail.
  Communicator shrink() const {
    ibcoll_comm_t out = nullptr;
    check(ibcoll_comm_shrink(handle_, &out));
    return Communicator(out, true);
  }

  template <typename T>
  void allreduce(std::span<const T> in, std::span<T> out, ibcoll_op_t op) const {
    check_sizes(in.size(), out.size());
    check(ibcoll_allreduce(in.data(), out.data(), out.size(), datatype_of<T>(), op, handle_));
  }
  template <typename T>
  void allreduce(std::span<T> in_out, ibcoll_op_t op) const {
    check(ibcoll_allreduce(IBCOLL_IN_PLACE, in_out.data(), in_out.size(), datatype_of<T>(), op,
                           handle_));
  }
  template <typename T>
  void bcast(std::span<T> data, int root) const {
    check(ibcoll_bcast(data.data(), data.size(), datatype_of<T>(), root, handle_));
  }
  template <typename T>
  Request iallreduce(std::span<T> in_out, ibcoll_op_t op) const {
    ibcoll_request_t r = nullptr;
    check(ibcoll_iallreduce(IBCOLL_IN_PLACE, in_out.data(), in_out.size(), datatype_of<T>(), op,
                            handle_, &r));
    return Request(r);
  }
  template <typename T>
  Request ibcast(std::span<T> data, int root) const {
    ibcoll_request_t r = nullptr;
    check(ibcoll_ibcast(data.data(), data.size(), datatype_of<T>(), root, handle_, &r));
    return Request(r);
  }

 private:
  static void check_sizes(size_t in, size_t out) {
    if (in != out) {
      throw Error(IBCOLL_ERR_INVALID_ARGUMENT, "in and out: " + std::to_string(in) + " and " +
                                                   std::to_string(out) + " elements");
    }
  }

  ibcoll_comm_t handle_;
  bool owned_;
};

// Joins the job (collective over every rank); the destructor finalizes it. Communicators and
// requests must go first.
class Context {
 public:
  Context() {
    check(ibcoll_init(&handle_));
    ibcoll_comm_t world = nullptr;
    check(ibcoll_comm_world(handle_, &world));
    world_ = Communicator(world, false);
  }
  ~Context() { ibcoll_finalize(handle_); }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  const Communicator& world() const { return world_; }
  void progress() { check(ibcoll_progress(handle_)); }

 private:
  ibcoll_context_t handle_ = nullptr;
  Communicator world_{nullptr, false};
};

}  // namespace ibcoll::api

#endif  // IBCOLL_IBCOLL_HPP
