// The listen handle: what listen() writes into NCCL's 128-byte buffer and the
// peer's connect() reads back (NCCL_NET_HANDLE_MAXSIZE, nccl-net-abi.md §2.5).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/wire.h"

namespace railyard::proxy {

/// Bytes NCCL gives a plugin for its handle (NCCL_NET_HANDLE_MAXSIZE).
inline constexpr size_t kHandleBytes = 128;

/// Most rail addresses a handle lists (a Spark host has four rails).
inline constexpr int kHandleMaxRails = 6;

/// Wire layout of a handle. Bytes [0, 112) are written by listen() and describe the
/// listener; bytes [112, 128) are connect()'s own state between retries (NCCL hands
/// the same buffer back on every retry, §2.5 "connect / accept").
struct HandleWire {
  RecordHeader header;  ///< magic, version, kind = kHello
  uint64_t listenId;    ///< random id of the listen comm
  uint16_t family;      ///< AF_INET or AF_INET6
  uint16_t port;        ///< listener TCP port, host byte order
  uint32_t pid;         ///< listener's process id, for error messages
  uint8_t addr[16];     ///< IPv4 (first 4 bytes) or IPv6 address of the listener
  char host[32];        ///< listener host name, for error messages
  uint64_t hostId;      ///< listener's cabling host id (fabric mode); 0 = plain mode
  uint8_t nrails;       ///< valid entries of railAddrs
  uint8_t pad[3];
  uint32_t railAddrs[kHandleMaxRails];  ///< listener's rail IPv4 addresses (network order)
  uint8_t verbsRails;   ///< rails of the listener's verbs device; 0 = a TCP listener
  uint8_t reserved[3];
  uint64_t stageMagic;  ///< kStageMagic once connect() has stored its state
  uint64_t stageState;  ///< connect()'s in-progress state (a pointer), valid with stageMagic
};
static_assert(sizeof(HandleWire) == kHandleBytes);

/// Marks the connect-state area of a handle as in use ("RYCONNST").
inline constexpr uint64_t kStageMagic = 0x54534e4e4f435952ull;

/// Decoded listener address of a handle.
struct ListenAddress {
  sockaddr_storage addr{};  ///< family, address and port, ready for connect(2)
  socklen_t len = 0;        ///< bytes of addr in use
  uint64_t listenId = 0;
  uint32_t pid = 0;         ///< listener's process id
  uint64_t hostId = 0;      ///< listener's cabling host id; 0 = plain mode (connect to addr)
  std::vector<in_addr> rails;  ///< listener's rail addresses (fabric mode, informative)
  int verbsRails = 0;       ///< rails of the listener's verbs device (0 = TCP transport)
  std::string host;         ///< listener host name (at most 31 bytes on the wire)
  /// "host/ip:port", for error messages.
  std::string ToString() const;
};

/// Writes a handle for a listener at `addr` into `out` (kHandleBytes), zeroing the
/// connect-state area.
void EncodeHandle(const ListenAddress& addr, void* out);

/// Validates and decodes a handle. InvalidUsage when the bytes are not a Railyard
/// handle (another plugin, or garbage) or come from another protocol version; the
/// message says which. InvalidArgument for an unknown address family.
Status DecodeHandle(const void* in, ListenAddress* out);

/// Formats a socket address as "ip:port".
std::string SockaddrToString(const sockaddr_storage& addr);

}  // namespace railyard::proxy
