// Channel: how collectives move bytes, whatever the transport underneath (verbs, shm).
// Messages are matched by (peer, tag) in the order they were sent. Completions run from the
// transport's poll(), i.e. from ProgressEngine::progress(); errors arrive through the same
// callback with a non-ok Status. Bad arguments throw Error(invalid_argument) and change nothing.
#pragma once

#include <cstddef>
#include <cstdint>

#include "base/inline_function.h"
#include "base/status.h"
#include "transport/notice.h"
#include "transport/progress.h"

namespace ibcoll::transport {

// Called once per operation; `bytes` is the length received (or sent). Held inline: posting a
// message allocates no callback.
using Completion = InlineFunction<void(const Status& status, size_t bytes)>;

class Channel : public Poller {
 public:
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // The largest message this channel accepts.
  virtual size_t max_message_size() const = 0;

  // `buffer` must stay valid until `done` runs. The arguments are checked here, once, whatever
  // channels sit below (RoutedChannel hands a checked call on unchecked).
  void send(int peer, uint64_t tag, const void* buffer, size_t length, Completion done) {
    check_send(peer, buffer, length, done);
    post_send(peer, tag, buffer, length, std::move(done));
  }
  // Receives a message of at most `capacity` bytes; a longer one completes with truncated.
  void recv(int peer, uint64_t tag, void* buffer, size_t capacity, Completion done) {
    check_recv(peer, buffer, capacity, done);
    post_recv(peer, tag, buffer, capacity, std::move(done));
  }
  // Withdraws every send and receive posted with a tag in [first, last] that has not
  // completed: their completions never run, and once this returns the channel reads and writes
  // none of their buffers again. What a peer or device may still be doing with one is stopped,
  // waited for, or made to fail. A peer whose message was withdrawn midway, or whose message
  // this rank will now never read, has that receive fail. For an operation given up on (a
  // deadline passed, a member failed), so that its caller may take its buffers back.
  virtual void cancel(uint64_t first, uint64_t last) = 0;
  // Whether a message of `bytes` between this rank and `peer`, either way, arrives without its
  // receiver's help: copied into the receiver's buffers or ring, so its send completes while the
  // receiver makes no progress (given room there, and the same settings on both ranks). Not
  // so for one read or written by the receiver's side (rendezvous, single copy).
  virtual bool unaided(int peer, size_t bytes) const {
    (void)peer;
    (void)bytes;
    return false;
  }
  // Why `peer` has failed (dead, connection broken), or null while it is fine. Lets an
  // operation that waits on someone else notice that a member it depends on is gone.
  virtual const Status* peer_failure(int peer) const = 0;
  // How many ranks are known gone (it only grows; RoutedChannel spreads such news): while none,
  // a new call need not look for gone members. A channel that does not keep count says none.
  virtual size_t failures_known() const { return 0; }

  // Who hears the news peers send (Notice): a peer this channel saw die (its process exited,
  // its node stopped answering), and a peer's notice (some rank of the job is gone, a
  // communicator was revoked). RoutedChannel, which spreads the news job-wide.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void peer_gone(const Channel& from, int peer, const Status& why) = 0;
    virtual void heard(const Channel& from, int teller, const Notice& notice) = 0;
  };
  void observe(Observer* observer) { observer_ = observer; }
  // Sends `notice` to `peer`, connecting to it first if need be; after the messages sent to it
  // before. Nothing if the peer has failed.
  virtual void tell(int peer, const Notice& notice) = 0;
  // Whether a notice told is still waiting to leave this process (for a connection, for room):
  // a rank that may make no call after telling drives progress until none is.
  virtual bool notices_pending() const { return false; }
  // Sends `notice` to every peer this channel reaches now (connected, not failed), except the
  // job rank a rank_gone notice names.
  virtual void tell_peers(const Notice& notice) = 0;
  // From now on `peer` is held failed, as if a transport had seen it die, and the job hears it
  // (RoutedChannel): for a member that another member's agreement holds failed. Only a channel
  // that spreads such news can; others throw Error(internal).
  virtual void hold_failed(int peer, const Status& why);
  // The same for a peer that looks alive but was silent too long where this rank waited on it
  // (an agreement): it is fenced out, and told so, so that it stops (Code::fenced).
  virtual void fence(int peer, const Status& why);

  // `peer` is gone by another's word (a peer saw it fail): a channel that would otherwise wait
  // on it (its own liveness checks, a flush at teardown) gives it up now, failing what waits on
  // it.
  virtual void peer_gone_elsewhere(int peer, const Status& why) {
    (void)peer;
    (void)why;
  }

 protected:
  // send and recv once their arguments are checked.
  virtual void post_send(int peer, uint64_t tag, const void* buffer, size_t length,
                         Completion done) = 0;
  virtual void post_recv(int peer, uint64_t tag, void* buffer, size_t capacity,
                         Completion done) = 0;
  // For a channel that hands a checked call on to another: no second check.
  static void forward_send(Channel& to, int peer, uint64_t tag, const void* buffer, size_t length,
                           Completion done) {
    to.post_send(peer, tag, buffer, length, std::move(done));
  }
  static void forward_recv(Channel& to, int peer, uint64_t tag, void* buffer, size_t capacity,
                           Completion done) {
    to.post_recv(peer, tag, buffer, capacity, std::move(done));
  }
  // The argument checks send and recv make: Error(invalid_argument) naming the argument.
  void check_send(int peer, const void* buffer, size_t length, const Completion& done) const;
  void check_recv(int peer, const void* buffer, size_t capacity, const Completion& done) const;
  // The status of a receive of `message_bytes` into `capacity`: ok, or truncated.
  static Status receive_status(int peer, uint64_t message_bytes, size_t capacity);
  // The status of an operation whose message `peer`'s `who` ("sender", "receiver") withdrew.
  static Status withdrawn(int peer, const char* who);
  // Throws Error(invalid_argument) for a peer outside the channel or this process, naming `call`.
  void check_peer(int peer, const char* call) const;

  Observer* observer_ = nullptr;
};

}  // namespace ibcoll::transport
