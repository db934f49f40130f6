// proxy/relay/relay_ring.h: the bytes a relayed socket holds for one direction, for
// the socket relay (relay_service.cc) to read into and write out of without blocking.
#pragma once

#include <sys/uio.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <vector>

namespace railyard::proxy {

/// A bounded ring buffer of bytes flowing one way: memory from the first byte, 64 KiB
/// then doubled while it fills, up to `cap` (hostile-peer probe: all of `cap` at the
/// first byte let one peer's 1020 idle relayed sockets, a byte each way, pin 2 GiB).
struct Ring {
  static constexpr size_t kFirstBytes = size_t{64} << 10;
  std::vector<char> buf;  ///< the bytes' room now (empty until the first data)
  size_t cap = 0;    ///< the most room it may grow to (RelayOptions::bufferBytes)
  size_t head = 0;   ///< first byte
  size_t len = 0;    ///< bytes held
  bool eof = false;  ///< the source closed its sending side
  bool shut = false; ///< we passed the close on (shutdown(SHUT_WR) of the sink)

  /// Bytes it may still take (growing as it needs).
  size_t Space() const { return cap - len; }
  /// Room for more: the first kFirstBytes (at most `cap`) at the first data, then twice
  /// the room (at most `cap`) once it is full, the bytes held moved to the front.
  /// Returns the bytes newly allocated.
  size_t Ensure() {
    if (buf.empty()) {
      buf.resize(std::min(kFirstBytes, cap));
      return buf.size();
    }
    if (len < buf.size() || buf.size() >= cap) return 0;
    std::vector<char> bigger(std::min(cap, 2 * buf.size()));
    const size_t first = std::min(len, buf.size() - head);
    std::memcpy(bigger.data(), buf.data() + head, first);
    std::memcpy(bigger.data() + first, buf.data(), len - first);
    const size_t grown = bigger.size() - buf.size();
    buf.swap(bigger);
    head = 0;
    return grown;
  }
  /// Up to two iovecs describing the free room (for readv).
  int FreeIov(iovec* iov) {
    const size_t room = buf.size();
    const size_t free = room - len;
    if (free == 0 || room == 0) return 0;
    const size_t tail = (head + len) % room;
    const size_t first = std::min(free, room - tail);
    iov[0] = {buf.data() + tail, first};
    if (first == free) return 1;
    iov[1] = {buf.data(), free - first};
    return 2;
  }
  /// Up to two iovecs describing the held bytes (for writev).
  int DataIov(iovec* iov) {
    if (len == 0) return 0;
    const size_t first = std::min(len, buf.size() - head);
    iov[0] = {buf.data() + head, first};
    if (first == len) return 1;
    iov[1] = {buf.data(), len - first};
    return 2;
  }
  void Consumed(size_t n) {
    head = (head + n) % buf.size();
    len -= n;
  }
};

}  // namespace railyard::proxy
