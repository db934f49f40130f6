// A hostile peer for the security suite: speaks Railyard's wire protocol
// (proxy/wire.h records) over real TCP sockets to a listener the plugin opened,
// so a test can send what a correct sender never would (a header on one socket
// and its payload much later, overlapping chunks, stray or idle connections).
// Loopback only. Every wait is bounded by a deadline.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "proxy/handle.h"
#include "proxy/wire.h"

namespace railyard::security {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;

/// One raw TCP connection to a listener, with a local port for /proc/net lookups.
struct RawSocket {
  int fd = -1;
  uint16_t localPort = 0;   ///< this socket's port (host order)
  uint16_t remotePort = 0;  ///< the listener's port (host order)
  bool v6 = false;
};

/// Decodes the 128-byte handle listen() wrote. False (with a gtest failure) if bad.
bool DecodeListenHandle(const void* handle, proxy::ListenAddress* out);

/// Opens a blocking TCP connection to `to`. fd < 0 (with a gtest failure) on error.
RawSocket Dial(const proxy::ListenAddress& to);
/// Closes `s` (no-op when already closed).
void CloseSocket(RawSocket* s);

/// Writes all of [data, data+bytes) (blocking, bounded by `deadline`). False on error.
bool SendAll(int fd, const void* data, size_t bytes, Clock::time_point deadline);
/// Reads exactly `bytes` (bounded by `deadline`). False on error, EOF or timeout.
bool RecvAll(int fd, void* data, size_t bytes, Clock::time_point deadline);
/// True once the peer closed `fd` (EOF or reset) before `deadline`; data is discarded.
bool WaitClosed(int fd, Clock::time_point deadline);

/// The hello record of socket `index` of a connection of `nsocks` data sockets.
proxy::HelloRecord Hello(const proxy::ListenAddress& to, uint64_t connId, uint16_t index, uint16_t nsocks);

/// A connection of one control socket and `nsocks` data sockets, each opened with
/// its hello, as TcpConnector makes it. socks[0] is the control socket.
struct RawConnection {
  std::vector<RawSocket> socks;
  bool ok() const { return !socks.empty(); }
  ~RawConnection();
};
/// Dials every socket and sends its hello. Empty (with a gtest failure) on error.
void OpenConnection(const proxy::ListenAddress& to, int nsocks, Clock::time_point deadline,
                    RawConnection* out);

/// Reads one clear-to-send record from the control socket and checks its header.
bool ReadCts(const RawConnection& c, proxy::CtsRecord* cts, Clock::time_point deadline);

/// A chunk header for bytes [off, off+len) of a `total`-byte message into entry
/// `slot` of `cts`.
proxy::ChunkHeader Chunk(const proxy::CtsRecord& cts, uint32_t slot, uint64_t off, uint32_t len, uint64_t total);

/// Waits until the receiving end of `s` has read everything sent on it so far
/// (the sender's queue is acknowledged and the receiver's queue is empty, from
/// /proc/net/tcp{,6}). False when `deadline` passes first: the receiver stopped
/// reading that socket.
bool WaitConsumed(const RawSocket& s, Clock::time_point deadline);

/// Open file descriptors of this process (entries of /proc/self/fd).
int OpenFds();

}  // namespace railyard::security
