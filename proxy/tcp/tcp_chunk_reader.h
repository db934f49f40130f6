// One data socket's incoming chunks, read with non-blocking recv calls that may
// stop anywhere: the header first, checked against the posted receives, then the
// payload straight into the posted buffer. Lets one thread serve every socket of
// a comm without blocking on any of them.
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstddef>
#include <string>

#include "env/status.h"
#include "proxy/protocol/recv_table.h"
#include "proxy/socket.h"
#include "proxy/wire.h"

namespace railyard::proxy {

/// The read side of one data socket. Not thread-safe: its owner serialises calls.
class ChunkReader {
 public:
  /// `what` names the socket in errors: "data socket N[ on rail R] from PEER".
  ChunkReader(int fd, std::string what, std::string peer)
      : fd_(fd), what_(std::move(what)), peer_(std::move(peer)) {}

  int fd() const { return fd_; }
  /// The socket's name in errors ("data socket N[ on rail R] from PEER").
  const std::string& what() const { return what_; }
  /// False once the peer closed the socket cleanly (between chunks).
  bool open() const { return open_; }

  /// Reads until the socket would block or closes, or `budget` bytes are read (so
  /// one busy socket cannot hold its caller). Every header is checked
  /// (record magic/version/kind, then RecvTable::Validate) before a payload byte
  /// lands, and each finished chunk is accounted with RecvTable::Land.
  /// *bytes = bytes read. *eof = true on an orderly close between chunks (the
  /// reader is then closed). Errors: SystemError naming the socket when the
  /// connection breaks or closes inside a chunk; RemoteError for a bad header or a
  /// chunk the posted receives do not allow.
  Status ReadSome(RecvTable& table, size_t budget, size_t* bytes, bool* eof) {
    *bytes = 0;
    *eof = false;
    while (open_ && *bytes < budget) {
      const bool inHeader = !accepted_;
      // In a payload, also read the next chunk's header (if it is there) in the
      // same call: one receive per chunk boundary instead of two.
      iovec iov[2];
      int niov = 1;
      if (inHeader) {
        iov[0] = {reinterpret_cast<char*>(&header_) + got_, sizeof header_ - got_};
      } else {
        iov[0] = {dest_ + (got_ - sizeof header_), sizeof header_ + header_.len - got_};
        iov[1] = {&next_, sizeof next_};
        niov = 2;
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(niov);
      const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return Status::Ok();
        return SystemError(what_ + ": receive failed: " + ErrnoText(errno));
      }
      if (n == 0) {
        if (got_ == 0) {
          open_ = false;
          *eof = true;
          return Status::Ok();
        }
        const size_t part = inHeader ? got_ : got_ - sizeof header_;
        const size_t whole = inHeader ? sizeof header_ : header_.len;
        return SystemError(what_ + ": connection closed by peer after " + std::to_string(part) + " of " +
                           std::to_string(whole) + " bytes");
      }
      const size_t first = std::min(static_cast<size_t>(n), iov[0].iov_len);
      got_ += first;
      *bytes += static_cast<size_t>(n);
      RY_RETURN_IF_ERROR(Settle(table, static_cast<size_t>(n) - first));
    }
    return Status::Ok();
  }

 private:
  /// Accepts a completed header, lands a completed chunk, and starts the next
  /// chunk with the `ahead` bytes of its header already read into next_.
  Status Settle(RecvTable& table, size_t ahead) {
    for (;;) {
      if (!accepted_ && got_ == sizeof header_) {
        RY_RETURN_IF_ERROR(Accept(table));
        accepted_ = true;
      }
      if (!accepted_ || got_ != sizeof header_ + header_.len) return Status::Ok();
      RY_RETURN_IF_ERROR(table.Land(header_));
      accepted_ = false;
      got_ = ahead;
      if (ahead == 0) return Status::Ok();
      std::memcpy(&header_, &next_, ahead);
      ahead = 0;
    }
  }

  /// Checks a complete header and finds where its payload goes.
  Status Accept(RecvTable& table) {
    RY_RETURN_IF_ERROR(CheckHeader(header_.header, ("chunk header on " + what_).c_str()));
    if (header_.header.kind != static_cast<uint16_t>(RecordKind::kChunk)) {
      return RemoteError("unexpected record kind " + std::to_string(header_.header.kind) + " on " + what_);
    }
    dest_ = nullptr;
    Status v = table.Validate(header_, &dest_);
    if (!v.ok()) return RemoteError(v.message() + " (from " + peer_ + ")");
    return Status::Ok();
  }

  int fd_;
  std::string what_;
  std::string peer_;
  bool open_ = true;
  ChunkHeader header_{};
  ChunkHeader next_{};     ///< start of the next chunk's header, read with a payload's end
  bool accepted_ = false;  ///< header_ is complete and passed Accept
  char* dest_ = nullptr;
  size_t got_ = 0;  ///< bytes of the current chunk read so far (header + payload)
};

}  // namespace railyard::proxy
