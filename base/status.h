// Status: the one error vocabulary of ibcoll. Set-up code throws Error (a Status); asynchronous
// operations report a Status through their completion callback. The C API maps both to codes.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

namespace ibcoll {

enum class Code {
  ok = 0,
  invalid_argument,  // the caller passed something wrong; the message names the argument
  not_supported,     // the device or build lacks a capability that was asked for
  system_error,      // an OS or verbs call failed; the message carries errno / verbs status
  timeout,           // a deadline passed
  peer_failed,       // a peer died or its connection broke
  truncated,         // a message was longer than the buffer posted for it
  mismatch,          // ranks disagree about a call
  internal,
  revoked,  // the communicator was revoked (ibcoll_comm_revoke)
  fenced,   // the other ranks declared this one failed: it is out of the job
};

const char* code_name(Code code);

class Status {
 public:
  Status() = default;
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {}

  bool ok() const { return code_ == Code::ok; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  std::string to_string() const;

 private:
  Code code_ = Code::ok;
  std::string message_;
};

class Error : public std::runtime_error {
 public:
  explicit Error(Status status)
      : std::runtime_error(status.to_string()), status_(std::move(status)) {}
  Error(Code code, std::string message) : Error(Status(code, std::move(message))) {}
  const Status& status() const { return status_; }

 private:
  Status status_;
};

// Throws system_error naming `what` and errno's text.
[[noreturn]] void throw_errno(const std::string& what, int err);

}  // namespace ibcoll
