// Fuzz target `relay_reply`: the bytes that come back on a fabric TCP socket dialed
// through a relay that splices sockets (proxy/fabric/tcp/frame_socket.cc): a relay's
// RejectRecord (proxy/wire.h) in place of the first frame, read whole, or frames to
// the initiator (acks, Read data, errors) from whatever is at the relay's port, for
// real, over loopback. Per input: a fresh TCP Domain and Worker on 127.0.0.1
// (RAILYARD_TIMEOUT_MS 100 ms, no redial), a listener standing in for the relay and
// an Endpoint spliced through it (a 16-byte preamble) with a Send record and a
// 64-byte Read posted; the listener accepts, answers with the input's bytes, then
// closes its sending side, or (input byte 0's low 3 bits all 0) stays silent until
// the Endpoint's timeout.
// Checks: each op ends in exactly one event before the deadline (nothing the relay
// sends wedges the Endpoint); an error event has a message, and a failed Endpoint a
// status with one; a reply that starts with a RejectRecord's header fails with
// CONNECT_FAILED "refused the socket: <reason>" where the reason is the record's,
// cut at its NUL or its 120 bytes; no byte lands outside the Read's 64 bytes.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/tcp/tcp_endpoint.h"
#include "proxy/fabric/tcp/tcp_worker.h"
#include "proxy/socket.h"
#include "proxy/wire.h"
#include "tests/fuzz/fuzz_target.h"

namespace f = railyard::fabric;
namespace t = railyard::fabric::tcp;
namespace p = railyard::proxy;

namespace {

/// A loopback listener at an ephemeral port; invalid when none could be made.
p::Fd Listen(uint16_t* port) {
  p::Fd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (!fd.valid() || ::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd.get(), 4) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return p::Fd();
  }
  *port = ntohs(a.sin_port);
  return fd;
}

/// What a RejectRecord at the front of `reply` says, as the dialer reads it; false
/// when the reply does not start with a reject record's header.
bool RejectReason(const std::vector<uint8_t>& reply, std::string* reason) {
  p::RecordHeader h{};
  if (reply.size() < 64) return false;  // the dialer reads a frame header's worth first
  std::memcpy(&h, reply.data(), sizeof h);
  if (h.magic != p::kMagic || h.kind != static_cast<uint16_t>(p::RecordKind::kReject)) return false;
  p::RejectRecord r{};
  std::memcpy(&r, reply.data(), std::min(reply.size(), sizeof r));
  r.reason[sizeof r.reason - 1] = '\0';
  *reason = std::string(r.reason, std::strlen(r.reason));
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(RelayReply) {
  Input in(data, size);
  const uint8_t flags = in.Take<uint8_t>();
  size_t n = 0;
  const uint8_t* bytes = in.Span(4096, &n);
  const std::vector<uint8_t> reply(bytes, bytes + n);

  uint16_t relayPort = 0;
  p::Fd listener = Listen(&relayPort);
  FUZZ_CHECK(listener.valid());
  t::TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = 100;
  o.connectRetryMs = 0;
  std::unique_ptr<f::Domain> domain;
  FUZZ_CHECK(t::CreateTcpDomain(o, &domain).ok());
  std::unique_ptr<f::Worker> worker;
  FUZZ_CHECK(domain->CreateWorker(&worker).ok());
  static uint8_t local[64 + 64 + 64];
  std::memset(local, 0xA5, sizeof local);
  const f::Region* region = nullptr;
  FUZZ_CHECK(domain->Register(local, sizeof local, f::kAccessLocal, f::MemoryKind::kHost, &region).ok());

  t::WorkerAddress peer;
  peer.workerId = 0x77;
  peer.rails.push_back({htonl(INADDR_LOOPBACK), 9, 10000});  // never dialed: the route goes to the "relay"
  t::SpliceRoute route;
  route.localRail = {0};
  route.via = "relay fuzz (127.0.0.1:" + std::to_string(relayPort) + ")";
  route.dial = [relayPort, via = route.via](int, int, t::DialPlan* plan) {
    plan->local.sin_family = AF_INET;
    plan->local.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    plan->remote.sin_family = AF_INET;
    plan->remote.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    plan->remote.sin_port = htons(relayPort);
    plan->preamble.assign(16, 0x5A);
    plan->via = via;
    return railyard::Status::Ok();
  };
  std::unique_ptr<f::Endpoint> ep;
  FUZZ_CHECK(static_cast<t::TcpWorker&>(*worker).ConnectSpliced(peer.Pack(), route, &ep).ok());
  FUZZ_CHECK(ep->Send(std::vector<uint8_t>{1, 2, 3}, 1).ok());
  f::RemoteKey key;
  key.base = 0x100000;
  key.length = 4096;
  key.softwareKey = 7;
  key.access = f::kAccessRemoteRead;
  FUZZ_CHECK(ep->Read(f::LocalSlice{region, 64, 64}, key, key.base, 2).ok());

  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  p::Fd relay;
  std::vector<f::Event> events;
  int ended[3] = {0, 0, 0};
  bool sent = false;
  while (Clock::now() < deadline && ended[1] + ended[2] < 2) {
    worker->Progress(&events);
    if (!relay.valid()) {
      pollfd pf{listener.get(), POLLIN, 0};
      if (::poll(&pf, 1, 0) == 1) relay = p::Fd(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    }
    if (relay.valid() && !sent) {
      size_t off = 0;
      while (off < reply.size()) {
        const ssize_t k = ::send(relay.get(), reply.data() + off, reply.size() - off, MSG_NOSIGNAL);
        if (k <= 0) break;  // the Endpoint already closed it (a bad frame): what went is the test
        off += static_cast<size_t>(k);
      }
      if ((flags & 7) != 0) ::shutdown(relay.get(), SHUT_WR);
      sent = true;
    }
    if (relay.valid()) {  // read what the Endpoint sends (a close with unread bytes would reset)
      char sink[4096];
      while (::recv(relay.get(), sink, sizeof sink, MSG_DONTWAIT) > 0) {
      }
    }
    for (const f::Event& e : events) {
      if (e.kind != f::EventKind::kDone && e.kind != f::EventKind::kError) continue;
      FUZZ_CHECK(e.cookie == 1 || e.cookie == 2);
      ++ended[e.cookie];
      if (e.kind == f::EventKind::kError) FUZZ_CHECK(!e.error.what.empty());
    }
    events.clear();
  }
  FUZZ_CHECK(ended[1] == 1 && ended[2] == 1);  // each op ended once, none wedged
  for (size_t i = 0; i < 64; ++i) FUZZ_CHECK(local[i] == 0xA5 && local[128 + i] == 0xA5);
  const railyard::Status st = ep->status();
  if (!st.ok()) FUZZ_CHECK(!st.message().empty());
  std::string reason;
  if (RejectReason(reply, &reason)) {
    FUZZ_CHECK(!st.ok());
    FUZZ_CHECK(st.message().find("CONNECT_FAILED") != std::string::npos);
    FUZZ_CHECK(st.message().find("refused the socket: " + reason) != std::string::npos);
  }
  ep.reset();
  worker.reset();
  return st.ok();
}
