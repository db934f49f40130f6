// One data socket's incoming chunks, read with non-blocking recv calls that may
// stop anywhere: the header first, which claims its bytes of a posted receive,
// then the payload straight into the posted buffer, each read re-checked. Lets one thread serve every socket of
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
  /// False once the peer closed the socket cleanly (between chunks).
  bool open() const { return open_; }

  /// Reads until the socket would block or closes, or `budget` bytes are read (so
  /// one busy socket cannot hold its caller). Every header is checked (record
  /// magic/version/kind) and claims its byte range (RecvTable::Claim) before a
  /// payload byte lands; every payload read is let in by RecvTable::BeginWrite
  /// (receive still posted, buffer still registered, comm not failed) and counted
  /// by RecvTable::EndWrite, which completes the receive once all its claims landed.
  /// *bytes = bytes read. *eof = true on an orderly close between chunks (the
  /// reader is then closed). Errors: SystemError naming the socket when the
  /// connection breaks or closes inside a chunk; RemoteError for a bad header, a
  /// chunk the posted receives do not allow, or a payload that may no longer land.
  Status ReadSome(RecvTable& table, size_t budget, size_t* bytes, bool* eof) {
    *bytes = 0;
    *eof = false;
    while (open_ && *bytes < budget) {
      const bool inHeader = !accepted_;
      // In a payload, also read the next chunk's header (if it is there) in the
      // same call: one receive per chunk boundary instead of two.
      iovec iov[2];
      int niov = 1;
      RecvTable::WritePin pin;
      if (inHeader) {
        iov[0] = {reinterpret_cast<char*>(&header_) + got_, sizeof header_ - got_};
      } else {
        Status w = table.BeginWrite(claim_, &pin);
        if (!w.ok()) return RemoteError(w.message() + " (on " + what_ + ")");
        iov[0] = {claim_.Next(), claim_.len - claim_.landed};
        iov[1] = {&next_, sizeof next_};
        niov = 2;
      }
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = static_cast<size_t>(niov);
      const ssize_t n = ::recvmsg(fd_, &msg, MSG_DONTWAIT);
      const int err = errno;
      pin.Release();  // the bytes are in place (or none came): deregMr may go on
      if (n < 0) {
        if (err == EINTR) continue;
        if (err == EAGAIN || err == EWOULDBLOCK) return Status::Ok();
        return SystemError(what_ + ": receive failed: " + ErrnoText(err));
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
      if (!inHeader) {
        Status l = table.EndWrite(&claim_, first);
        if (!l.ok()) return RemoteError(l.message() + " (on " + what_ + ")");
      }
      got_ += first;
      *bytes += static_cast<size_t>(n);
      RY_RETURN_IF_ERROR(Settle(table, static_cast<size_t>(n) - first));
    }
    return Status::Ok();
  }

 private:
  /// Accepts a completed header (claiming its bytes), ends a chunk whose payload
  /// has all landed, and starts the next chunk with the `ahead` bytes of its
  /// header already read into next_.
  Status Settle(RecvTable& table, size_t ahead) {
    for (;;) {
      if (!accepted_ && got_ == sizeof header_) {
        RY_RETURN_IF_ERROR(Accept(table));
        accepted_ = true;
      }
      if (!accepted_ || got_ != sizeof header_ + header_.len) return Status::Ok();
      accepted_ = false;  // EndWrite counted the payload as it landed
      got_ = ahead;
      if (ahead == 0) return Status::Ok();
      std::memcpy(&header_, &next_, ahead);
      ahead = 0;
    }
  }

  /// Checks a complete header and claims the bytes its payload will fill.
  Status Accept(RecvTable& table) {
    RY_RETURN_IF_ERROR(CheckHeader(header_.header, ("chunk header on " + what_).c_str()));
    if (header_.header.kind != static_cast<uint16_t>(RecordKind::kChunk)) {
      return RemoteError("unexpected record kind " + std::to_string(header_.header.kind) + " on " + what_);
    }
    claim_ = RecvTable::ChunkClaim{};
    Status v = table.Claim(header_, &claim_);
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
  RecvTable::ChunkClaim claim_{};  ///< the current chunk's claim, once accepted_
  size_t got_ = 0;  ///< bytes of the current chunk read so far (header + payload)
};

}  // namespace railyard::proxy
