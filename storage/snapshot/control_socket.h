// The snapshot tier's control channel: a plain TCP connection (blocking, with
// send and receive timeouts) carrying the handshake and the paging requests of
// snapshot_wire.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/socket.h"

namespace railyard::storage::snapshot {

/// Connects to `host` (an IPv4 dotted quad, or a name resolved to its first IPv4
/// address: getaddrinfo) : `port` within `timeoutMs`, then sets `timeoutMs` as the
/// socket's send and receive timeout. SystemError naming the peer when it cannot;
/// InvalidArgument for a host that resolves to no IPv4 address.
Status ConnectControl(const std::string& host, uint16_t port, int timeoutMs, proxy::Fd* out);
/// Listens on `address`:`port` (0 = ephemeral); `*bound` gets the port.
Status ListenControl(const std::string& address, uint16_t port, proxy::Fd* out, uint16_t* bound);
/// Sets SO_RCVTIMEO / SO_SNDTIMEO (ms; 0 = none).
Status SetTimeouts(int fd, int timeoutMs);
/// Turns on TCP keepalive so that a connection resting without a deadline still ends
/// when its peer's host is gone: the first probe after max(timeoutMs, 10 s) of
/// silence, then 3 probes 5 s apart. SystemError on a setsockopt failure.
Status SetKeepalive(int fd, int timeoutMs);
/// Sends `bytes` on `fd` without waiting, or appends what the socket does not take now
/// (all of it once `*spilled` holds anything, to keep the order) to `*spilled`, for
/// the caller to send later, waiting, in that order. For a thread that holds a lock
/// others need (the paging arena's, during a fault): a peer that stops reading must
/// not hold it. An error other than EAGAIN spills too; the later send reports it.
void SendOrSpill(int fd, const std::vector<uint8_t>& bytes, std::vector<uint8_t>* spilled);

}  // namespace railyard::storage::snapshot
