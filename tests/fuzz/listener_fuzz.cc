// Fuzz target `listener`: hellos as the TCP listener reads them
// (proxy/tcp/tcp_listen_comm.h TcpListenComm::AcceptConnection, for real, over
// loopback): a fresh listener per input, 1..4 sockets connected to it, each
// sending up to 64 fuzzed bytes (a HelloRecord, or the start of one, then a
// close). The listener must group good hellos into a connection, refuse bad ones
// with a well-formed RejectRecord (read back on the connector's socket: magic,
// version, kind, NUL-terminated reason) and an error Status with a message.
// Input: byte 0 = listener options (bits 0-2: nsocks % 5, 0 = a verbs listener;
// bit 7: acceptControlOnly), byte 1 = sockets (1 + b % 4); per socket a flags
// byte (bit 0: write the real listen id into the hello, which the fuzzer cannot
// guess; bit 1: send only the next byte % 64 bytes, then close), then 64 bytes.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_listen_comm.h"
#include "tests/fuzz/fuzz_target.h"

namespace p = railyard::proxy;

RAILYARD_FUZZ_TARGET(Listener) {
  Input in(data, size);
  const uint8_t opt = in.Take<uint8_t>();
  p::TcpOptions options;
  options.nsocks = opt % 8 % 5;
  options.acceptControlOnly = (opt & 0x80) != 0;
  options.device = "lo";
  const int nsock = 1 + in.Take<uint8_t>() % 4;

  sockaddr_storage bind{};
  auto* sin = reinterpret_cast<sockaddr_in*>(&bind);
  sin->sin_family = AF_INET;
  sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::unique_ptr<p::TcpListenComm> listener;
  p::ListenAddress handle;
  // Creating the listener fails only for want of local resources (ports, fds), which
  // says nothing about the decoder: skip the input then.
  if (!p::TcpListenComm::Create(bind, sizeof(sockaddr_in), options, "fuzz-listener", nullptr, &listener, &handle)
           .ok()) {
    return false;
  }
  std::vector<int> clients;
  for (int i = 0; i < nsock; ++i) {
    const uint8_t flags = in.Take<uint8_t>();
    size_t len = sizeof(p::HelloRecord);
    if (flags & 2) len = in.Take<uint8_t>() % sizeof(p::HelloRecord);
    uint8_t hello[sizeof(p::HelloRecord)];
    in.Bytes(hello, sizeof hello);
    if (flags & 1) std::memcpy(hello + offsetof(p::HelloRecord, listenId), &handle.listenId, 8);
    const int c = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    FUZZ_CHECK(c >= 0);
    const linger reset{1, 0};  // close with RST: no TIME_WAIT piling up over millions of runs
    ::setsockopt(c, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
    if (::connect(c, reinterpret_cast<const sockaddr*>(&handle.addr), handle.len) != 0) {
      ::close(c);  // out of local ports (TIME_WAIT of earlier runs): not the decoder's doing
      break;
    }
    FUZZ_CHECK(::send(c, hello, len, MSG_NOSIGNAL) == static_cast<ssize_t>(len));
    if (len < sizeof hello) ::shutdown(c, SHUT_WR);
    clients.push_back(c);
  }
  bool accepted = false;
  for (int pass = 0; pass < nsock + 2; ++pass) {
    p::TcpConnection conn;
    bool got = false;
    const railyard::Status s = listener->AcceptConnection(&conn, &got);
    if (!s.ok()) {
      FUZZ_CHECK_REFUSAL(s);
      FUZZ_CHECK(!got);
      continue;
    }
    if (!got) continue;
    accepted = true;
    FUZZ_CHECK(conn.control.valid());
    FUZZ_CHECK(conn.data.size() <= 64);
    FUZZ_CHECK(conn.peer.host.size() <= 32);  // the hello's 32-byte field, NUL or not
    for (const p::Fd& d : conn.data) FUZZ_CHECK(d.valid());
  }
  // A refused socket got a reject record first: it must be one.
  for (int c : clients) {
    p::RejectRecord r;
    const ssize_t n = ::recv(c, &r, sizeof r, MSG_DONTWAIT);
    if (n == static_cast<ssize_t>(sizeof r)) {
      FUZZ_CHECK(p::CheckHeader(r.header, "reject record").ok());
      FUZZ_CHECK(r.header.kind == static_cast<uint16_t>(p::RecordKind::kReject));
      FUZZ_CHECK(std::memchr(r.reason, '\0', sizeof r.reason) != nullptr);
    }
    ::close(c);
  }
  return accepted;
}
