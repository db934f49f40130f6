// Fuzz target `handle`: the 128-byte listen handle a peer's listen() wrote and
// NCCL carried to this rank's connect() (proxy/handle.h DecodeHandle).
// Input: up to 128 bytes (zero-padded). Checks: a decoded handle is
// self-consistent (family/length, port != 0, at most kHandleMaxRails rails) and
// survives EncodeHandle -> DecodeHandle unchanged; a refusal carries a message.
#include <sys/socket.h>

#include "proxy/handle.h"
#include "tests/fuzz/fuzz_target.h"

using railyard::proxy::DecodeHandle;
using railyard::proxy::EncodeHandle;
using railyard::proxy::kHandleBytes;
using railyard::proxy::kHandleMaxRails;
using railyard::proxy::ListenAddress;

RAILYARD_FUZZ_TARGET(Handle) {
  uint8_t handle[kHandleBytes];
  Input(data, size).Bytes(handle, sizeof handle);
  ListenAddress a;
  const railyard::Status s = DecodeHandle(handle, &a);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    return false;
  }
  FUZZ_CHECK(a.addr.ss_family == AF_INET || a.addr.ss_family == AF_INET6);
  FUZZ_CHECK(a.len == (a.addr.ss_family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6)));
  FUZZ_CHECK(a.rails.size() <= static_cast<size_t>(kHandleMaxRails));
  FUZZ_CHECK(a.host.size() < 32);
  FUZZ_CHECK(!a.ToString().empty());
  uint8_t again[kHandleBytes];
  EncodeHandle(a, again);
  ListenAddress b;
  FUZZ_CHECK(DecodeHandle(again, &b).ok());
  FUZZ_CHECK(b.listenId == a.listenId && b.pid == a.pid && b.hostId == a.hostId && b.host == a.host &&
             b.verbsRails == a.verbsRails && b.len == a.len && b.rails.size() == a.rails.size());
  FUZZ_CHECK(std::memcmp(&b.addr, &a.addr, a.len) == 0);
  return true;
}
