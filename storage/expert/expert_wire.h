// The expert tier's control protocol, spoken over one TCP connection per client
// (little-endian, fixed-size headers; every length from the peer is capped).
//
//   peer -> client  Hello   {magic "RYEX" u32, version u16, reserved u16, manifestBytes u32}
//                           then the manifest JSON (<= kMaxManifestBytes)
//   client -> peer  Choose  {transport u8 (kTransportTcp | kTransportRead), reserved[7]}
//                           (sent at connect, before the client reads the Hello: the peer
//                           reads it after sending its Hello and manifest; a port that
//                           waits for its client to speak first, a snapshot peer's, then
//                           refuses at once instead of both ends waiting out a timeout)
//   peer -> client  Reply   {errc u8, reserved[3], textBytes u32, payloadBytes u64}, text
//                           (why, when errc != 0), then for kTransportRead the payload:
//                           {addrBytes u32, Worker address, layers u32,
//                            layers x {keyBytes u32, packed RemoteKey}}
//   TCP mode, repeated:
//   client -> peer  Request {op u8 (kOpFetch | kOpShutdown), reserved[3], layer u32, expert u64}
//   peer -> client  Reply   (payload = the record's stride bytes when errc == 0)
//   READ mode: kOpShutdown and kOpStatus (each answered by an empty Reply; kOpStatus's
//   carries STORE_CHANGED once the peer has withdrawn its layer registrations); records
//   move as fabric Reads of the published keys. A peer of an older build answers
//   kOpStatus with PROTOCOL.
// A kOpShutdown is answered and the peer closes the connection (a polite close).
#pragma once

#include <cstdint>
#include <string>

#include "env/status.h"

namespace railyard::expert {

constexpr uint32_t kHelloMagic = 0x58455952;  // "RYEX" little-endian
constexpr uint16_t kWireVersion = 1;
constexpr uint8_t kTransportTcp = 1;
constexpr uint8_t kTransportRead = 2;
constexpr uint8_t kOpFetch = 1;
constexpr uint8_t kOpShutdown = 2;
/// READ mode: "are you still serving?" (the client asks after a failed Read).
constexpr uint8_t kOpStatus = 3;
/// Longest error text a reply may carry.
constexpr uint32_t kMaxReplyText = 4096;
/// Longest Worker address / packed key in a READ reply.
constexpr uint32_t kMaxAddressBytes = 4096;

#pragma pack(push, 1)
struct HelloHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t reserved;
  uint32_t manifestBytes;
};
struct ChooseMessage {
  uint8_t transport;
  uint8_t reserved[7];
};
struct RequestMessage {
  uint8_t op;
  uint8_t reserved[3];
  uint32_t layer;
  uint64_t expert;
};
struct ReplyHeader {
  uint8_t errc;
  uint8_t reserved[3];
  uint32_t textBytes;
  uint64_t payloadBytes;
};
#pragma pack(pop)
static_assert(sizeof(HelloHeader) == 12 && sizeof(ChooseMessage) == 8 && sizeof(RequestMessage) == 16 &&
              sizeof(ReplyHeader) == 16);

/// "tcp", "read", "unknown".
const char* TransportName(uint8_t transport);

/// Sets SO_RCVTIMEO and SO_SNDTIMEO to `timeoutMs` (0 = none) so a silent peer ends a
/// blocking call with EAGAIN. SYSTEM on failure.
Status SetSocketTimeouts(int fd, int timeoutMs);
/// Blocking send of every byte; PEER_LOST naming `what` when the connection breaks or times out.
Status WireSend(int fd, const void* data, uint64_t bytes, const std::string& what);
/// Blocking receive of exactly `bytes`; PEER_LOST naming `what` on EOF, reset or timeout.
Status WireRecv(int fd, void* data, uint64_t bytes, const std::string& what);
/// Connects to host:port (IPv4 dotted quad or a name getaddrinfo resolves), with
/// `timeoutMs` for the connect. PEER_LOST when nobody answers; INVALID_ARGUMENT for a bad host.
Status WireConnect(const std::string& host, uint16_t port, int timeoutMs, int* fd);
/// Splits "host:port" (port 1..65535, or 0 too with `allowZero`). INVALID_ARGUMENT otherwise.
Status ParseHostPort(const std::string& peer, std::string* host, uint16_t* port, bool allowZero = false);

}  // namespace railyard::expert
