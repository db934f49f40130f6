// The snapshot tier's control channel: a plain TCP connection (blocking, with
// send and receive timeouts) carrying the handshake and the paging requests of
// snapshot_wire.h.
#pragma once

#include <cstdint>
#include <string>

#include "env/status.h"
#include "proxy/socket.h"

namespace railyard::storage::snapshot {

/// Connects to `host` (IPv4 dotted quad) : `port` within `timeoutMs`, then sets
/// `timeoutMs` as the socket's send and receive timeout. SystemError naming the
/// peer when it cannot; InvalidArgument for a host that is not an IPv4 address.
Status ConnectControl(const std::string& host, uint16_t port, int timeoutMs, proxy::Fd* out);
/// Listens on `address`:`port` (0 = ephemeral); `*bound` gets the port.
Status ListenControl(const std::string& address, uint16_t port, proxy::Fd* out, uint16_t* bound);
/// Sets SO_RCVTIMEO / SO_SNDTIMEO (ms; 0 = none).
Status SetTimeouts(int fd, int timeoutMs);

}  // namespace railyard::storage::snapshot
