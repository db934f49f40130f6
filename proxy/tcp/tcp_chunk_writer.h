// One data socket's outgoing chunks (header + payload, in order), written with
// non-blocking sendmsg calls that may stop anywhere, so one thread can keep every
// socket of a comm busy without blocking on any of them.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <deque>
#include <string>

#include "env/status.h"
#include "proxy/socket.h"
#include "proxy/wire.h"

namespace railyard::proxy {

/// A chunk queued on a socket. `done` counts header + payload bytes already written.
struct OutChunk {
  ChunkHeader header;
  const char* payload = nullptr;
  std::atomic<int>* written = nullptr;  ///< incremented (release) when the chunk is fully written
  int tag = 0;                          ///< the sending rank (names it in errors)
  size_t done = 0;
};

/// The write side of one data socket. Not thread-safe: its owner serialises calls.
class ChunkWriter {
 public:
  /// At most this many chunks go into one sendmsg call.
  static constexpr int kMaxBatch = 8;

  ChunkWriter(int fd, std::string label) : fd_(fd), label_(std::move(label)) {}

  void Push(const OutChunk& c) { queue_.push_back(c); }
  bool Idle() const { return queue_.empty(); }
  size_t Queued() const { return queue_.size(); }
  /// The chunk being written (the queue must not be empty).
  const OutChunk& Front() const { return queue_.front(); }
  int fd() const { return fd_; }
  /// "data socket N[ on rail R]", for error messages.
  const std::string& label() const { return label_; }
  /// Forgets every queued chunk (the comm failed).
  void Drop() { queue_.clear(); }

  /// Writes queued bytes until the socket would block, the queue is empty, or
  /// `budget` bytes are written (so one socket cannot hold its caller).
  /// *bytes = bytes written (0 when the socket had no room). SystemError naming
  /// the socket when the connection broke.
  Status WriteSome(size_t budget, size_t* bytes) {
    *bytes = 0;
    while (!queue_.empty() && *bytes < budget) {
      iovec iov[2 * kMaxBatch];
      int n = 0;
      for (size_t k = 0; k < queue_.size() && n + 2 <= 2 * kMaxBatch; ++k) {
        const OutChunk& c = queue_[k];
        size_t skip = c.done;
        if (skip < sizeof c.header) {
          iov[n++] = {reinterpret_cast<char*>(const_cast<ChunkHeader*>(&c.header)) + skip,
                      sizeof c.header - skip};
          skip = 0;
        } else {
          skip -= sizeof c.header;
        }
        if (c.header.len > skip) iov[n++] = {const_cast<char*>(c.payload) + skip, c.header.len - skip};
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(n);
      const ssize_t sent = ::sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (sent < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
        return SystemError(label_ + ": send failed: " + ErrnoText(errno));
      }
      *bytes += static_cast<size_t>(sent);
      size_t left = static_cast<size_t>(sent);
      while (left > 0) {
        OutChunk& c = queue_.front();
        const size_t take = std::min(left, Remaining(c));
        c.done += take;
        left -= take;
        if (Remaining(c) > 0) break;
        c.written->fetch_add(1, std::memory_order_release);
        queue_.pop_front();
      }
    }
    return Status::Ok();
  }

 private:
  static size_t Remaining(const OutChunk& c) { return sizeof c.header + c.header.len - c.done; }

  int fd_;
  std::string label_;
  std::deque<OutChunk> queue_;
};

}  // namespace railyard::proxy
