// The control tunnel (storage/tunnel/control_tunnel.h) in one process over loopback
// TCP fabric Domains: an expert peer reached only through it (manifest, key table,
// READ fetches checked by content, polite close); a stream larger than the credit
// window both ways (echo), checked byte for byte; hostile records (bad magic, another
// version, a tunnel nobody opened, data past the window) counted and dropped while a
// real tunnel goes on; the acceptor gone mid-connection ends the dialer's local
// socket within the fabric timeout, with the error kept.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <vector>
#include <thread>

#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "storage/expert/expert_client.h"
#include "storage/expert/expert_error.h"
#include "storage/expert/expert_server.h"
#include "storage/expert/store.h"
#include "storage/expert/store_writer.h"
#include "storage/snapshot/snapshot_client.h"
#include "storage/tunnel/control_tunnel.h"
#include "storage/tunnel/tunnel_wire.h"
#include "tests/common/free_port.h"

namespace railyard::storage::tunnel {
namespace {

constexpr int kTimeoutMs = 2000;

std::unique_ptr<fabric::Domain> Loopback() {
  fabric::tcp::TcpOptions o;
  o.rails = {{"lo", "127.0.0.1", 10000}};
  o.timeoutMs = kTimeoutMs;
  std::unique_ptr<fabric::Domain> d;
  EXPECT_TRUE(fabric::tcp::CreateTcpDomain(o, &d).ok());
  return d;
}

int ConnectTo(const std::string& hostPort) {
  const size_t colon = hostPort.find(':');
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(hostPort.substr(colon + 1))));
  inet_pton(AF_INET, hostPort.substr(0, colon).c_str(), &a.sin_addr);
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  return fd;
}

/// A TCP echo server on 127.0.0.1 (a thread per connection), for stream tests.
struct Echo {
  int listenFd = -1;
  uint16_t port = 0;
  std::thread thread;
  std::atomic<bool> stop{false};
  std::mutex mu;
  std::vector<int> fds;
  std::vector<std::thread> conns;
  Echo() {
    listenFd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listenFd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listenFd, 4), 0);
    ::getsockname(listenFd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    thread = std::thread([this] {
      while (!stop.load()) {
        pollfd p{listenFd, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        const int fd = ::accept(listenFd, nullptr, nullptr);
        std::lock_guard<std::mutex> lock(mu);
        fds.push_back(fd);
        conns.emplace_back([fd] {
          char buf[65536];
          for (;;) {
            const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
            if (n <= 0) break;
            ssize_t off = 0;
            while (off < n) {
              const ssize_t w = ::send(fd, buf + off, static_cast<size_t>(n - off), MSG_NOSIGNAL);
              if (w <= 0) return;
              off += w;
            }
          }
        });
      }
    });
  }
  ~Echo() {
    stop.store(true);
    thread.join();
    for (int fd : fds) ::shutdown(fd, SHUT_RDWR);
    for (std::thread& t : conns) t.join();
    for (int fd : fds) ::close(fd);
    ::close(listenFd);
  }
};

TEST(ControlTunnel, StreamLargerThanTheWindowEchoesByteForByte) {
  Echo echo;
  auto serverDomain = Loopback(), clientDomain = Loopback();
  TunnelOptions o;
  o.windowBytes = 256 * 1024;  // the 3 MiB stream needs a dozen window turns each way
  std::unique_ptr<ControlTunnel> acceptor, dialer;
  ASSERT_TRUE(ControlTunnel::Accept(*serverDomain, "127.0.0.1", echo.port, o, &acceptor).ok());
  ASSERT_TRUE(ControlTunnel::Dial(*clientDomain, acceptor->WorkerAddress(), o, &dialer).ok());
  const int fd = ConnectTo(dialer->LocalAddress());
  std::vector<uint8_t> out(3 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 7 + (i >> 13));
  std::thread writer([&] {
    size_t off = 0;
    while (off < out.size()) {
      const ssize_t w = ::send(fd, out.data() + off, std::min<size_t>(100003, out.size() - off), MSG_NOSIGNAL);
      ASSERT_GT(w, 0);
      off += static_cast<size_t>(w);
    }
  });
  size_t got = 0;
  timeval tv{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  while (got < in.size()) {
    const ssize_t n = ::recv(fd, in.data() + got, in.size() - got, 0);
    ASSERT_GT(n, 0) << "the echo stopped after " << got << " bytes";
    got += static_cast<size_t>(n);
  }
  writer.join();
  EXPECT_EQ(in, out);
  ::close(fd);
  const TunnelStats d = dialer->stats();
  EXPECT_EQ(d.opened, 1u);
  EXPECT_EQ(d.bytesOut, out.size());
  EXPECT_EQ(d.bytesIn, out.size());
  EXPECT_EQ(d.malformed, 0u);
}

/// Sends one byte on `fd` and waits (bounded) for its echo: true when it came back.
bool EchoesOneByte(int fd, char c) {
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::send(fd, &c, 1, MSG_NOSIGNAL) != 1) return false;
  char back = 0;
  return ::recv(fd, &back, 1, 0) == 1 && back == c;
}

// One peer cannot take every tunnel: past maxTunnelsPerPeer its Opens are refused
// (the local connection ends), while the tunnels it holds keep working.
TEST(ControlTunnel, OnePeerIsCappedAtItsShareOfTunnels) {
  Echo echo;
  auto serverDomain = Loopback(), clientDomain = Loopback();
  TunnelOptions o;
  o.maxTunnelsPerPeer = 2;
  std::unique_ptr<ControlTunnel> acceptor, dialer;
  ASSERT_TRUE(ControlTunnel::Accept(*serverDomain, "127.0.0.1", echo.port, o, &acceptor).ok());
  ASSERT_TRUE(ControlTunnel::Dial(*clientDomain, acceptor->WorkerAddress(), o, &dialer).ok());
  const int a = ConnectTo(dialer->LocalAddress());
  ASSERT_TRUE(EchoesOneByte(a, 'a'));
  const int b = ConnectTo(dialer->LocalAddress());
  ASSERT_TRUE(EchoesOneByte(b, 'b'));
  const int c = ConnectTo(dialer->LocalAddress());
  timeval tv{10, 0};
  ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char x = 'c';
  (void)::send(c, &x, 1, MSG_NOSIGNAL);
  EXPECT_LE(::recv(c, &x, 1, 0), 0) << "a third tunnel of the same peer was served";
  EXPECT_TRUE(EchoesOneByte(a, 'A'));  // the two it holds still work
  EXPECT_TRUE(EchoesOneByte(b, 'B'));
  const TunnelStats st = acceptor->stats();
  EXPECT_EQ(st.opened, 2u);
  EXPECT_EQ(st.refused, 1u);
  EXPECT_NE(acceptor->lastError().find("at most 2 per peer"), std::string::npos) << acceptor->lastError();
  ::close(a);
  ::close(b);
  ::close(c);
}

/// A pattern store of 2 layers x 6 experts of 64 KiB records.
std::string WriteStoreDir() {
  char tmpl[] = "/tmp/railyard-tunnel-XXXXXX";
  const std::string dir = std::string(::mkdtemp(tmpl)) + "/store";
  expert::Manifest m;
  m.modelId = "test/tunnel";
  m.scheme = "qwen-moe";
  m.expertsPerLayer = 6;
  m.alignment = 256;
  m.tensors = {{"gate_proj.weight", "BF16", {16384}, 0, 32768}, {"down_proj.weight", "BF16", {16384}, 32768, 32768}};
  m.recordBytes = 65536;
  m.recordStride = 65536;
  m.layers = {{1, "", {}}, {3, "", {}}};
  EXPECT_TRUE(expert::WriteStore(dir, m, [](size_t l, uint64_t e, char* dst) {
                for (int i = 0; i < 65536; ++i) dst[i] = static_cast<char>(l * 31 + e * 7 + i % 251);
                return Status::Ok();
              }).ok());
  return dir;
}

TEST(ControlTunnel, ExpertPeerReachedOnlyThroughTheTunnel) {
  const std::string dir = WriteStoreDir();
  auto serverDomain = Loopback(), clientDomain = Loopback();
  std::unique_ptr<fabric::Worker> serverWorker, clientWorker;
  ASSERT_TRUE(serverDomain->CreateWorker(&serverWorker).ok());
  ASSERT_TRUE(clientDomain->CreateWorker(&clientWorker).ok());
  std::unique_ptr<expert::Store> store;
  ASSERT_TRUE(expert::Store::Open(dir, false, &store).ok());
  expert::ServerOptions so;
  so.timeoutMs = kTimeoutMs;
  std::unique_ptr<expert::ExpertServer> server;
  ASSERT_TRUE(expert::ExpertServer::Start(std::move(store), serverDomain.get(), serverWorker.get(), so, &server).ok());
  std::unique_ptr<ControlTunnel> acceptor, dialer;
  ASSERT_TRUE(ControlTunnel::Accept(*serverDomain, "127.0.0.1", server->port(), {}, &acceptor).ok());
  ASSERT_TRUE(ControlTunnel::Dial(*clientDomain, acceptor->WorkerAddress(), {}, &dialer).ok());
  fabric::RegistrationCache cache(*clientDomain);
  std::vector<char> arena(6 * 65536);
  expert::ClientOptions co;
  co.timeoutMs = kTimeoutMs;
  std::unique_ptr<expert::ExpertClient> client;
  Status s = expert::ExpertClient::Open(dialer->LocalAddress(), co, cache, clientWorker.get(), arena.data(), arena.size(), &client);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(client->manifest().expertsPerLayer, 6u);
  std::vector<expert::RecordRequest> batch;
  for (uint64_t e = 0; e < 6; ++e) batch.push_back({1, e, e * 65536});
  s = client->FetchBatch(batch);
  ASSERT_TRUE(s.ok()) << s.message();
  for (uint64_t e = 0; e < 6; ++e) {
    for (int i = 0; i < 65536; i += 4093) {
      ASSERT_EQ(arena[e * 65536 + i], static_cast<char>(1 * 31 + e * 7 + i % 251)) << "expert " << e << " byte " << i;
    }
  }
  s = client->Close();
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(server->stats().shutdowns, 1u);
  EXPECT_EQ(acceptor->stats().opened, 1u);
  client.reset();
  server->Stop();
  std::filesystem::remove_all(std::filesystem::path(dir).parent_path());
}

/// Sends one raw record from a third Worker to `to`, progressing until it is done.
void SendRaw(fabric::Worker& w, fabric::Endpoint& ep, const std::vector<uint8_t>& bytes) {
  static uint64_t cookie = 1000;
  ASSERT_TRUE(ep.Send(bytes, ++cookie).ok());
  std::vector<fabric::Event> ev;
  for (int i = 0; i < 2000 && ep.Outstanding() > 0; ++i) {
    ev.clear();
    w.Progress(&ev);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));  // polling the send's completion
  }
}

TEST(ControlTunnel, HostileRecordsAreCountedAndDroppedWhileARealTunnelGoesOn) {
  Echo echo;
  auto serverDomain = Loopback(), clientDomain = Loopback(), hostileDomain = Loopback();
  TunnelOptions o;
  o.windowBytes = 64 * 1024;
  std::unique_ptr<ControlTunnel> acceptor, dialer;
  ASSERT_TRUE(ControlTunnel::Accept(*serverDomain, "127.0.0.1", echo.port, o, &acceptor).ok());
  ASSERT_TRUE(ControlTunnel::Dial(*clientDomain, acceptor->WorkerAddress(), o, &dialer).ok());
  std::unique_ptr<fabric::Worker> hw;
  std::unique_ptr<fabric::Endpoint> hep;
  ASSERT_TRUE(hostileDomain->CreateWorker(&hw).ok());
  ASSERT_TRUE(hw->Connect(acceptor->WorkerAddress(), &hep).ok());
  std::vector<uint8_t> bytes;
  TunnelRecord r;
  // Not a tunnel record at all; another version; data for a tunnel nobody opened.
  SendRaw(*hw, *hep, std::vector<uint8_t>(40, 0xab));
  r.type = TunnelRecordType::kData;
  r.tunnel = 77;
  r.payload.assign(10, 1);
  ASSERT_TRUE(Encode(r, &bytes).ok());
  std::vector<uint8_t> v2 = bytes;
  v2[4] = 2;
  SendRaw(*hw, *hep, v2);
  SendRaw(*hw, *hep, bytes);
  // A real Open from the hostile Worker, then more data than the window in one go
  // without reading (the echo's replies pile up at the hostile side, never credited:
  // the acceptor must stop at its window, not buffer).
  r.type = TunnelRecordType::kOpen;
  r.tunnel = 78;
  r.payload = hw->Address();
  ASSERT_TRUE(Encode(r, &bytes).ok());
  SendRaw(*hw, *hep, bytes);
  r.type = TunnelRecordType::kData;
  r.payload.assign(kMaxDataBytes, 2);
  ASSERT_TRUE(Encode(r, &bytes).ok());
  for (int i = 0; i < 4; ++i) SendRaw(*hw, *hep, bytes);  // 128 KiB into a 64 KiB window
  // Meanwhile a real client's bytes go through and back.
  const int fd = ConnectTo(dialer->LocalAddress());
  const char hello[] = "railyard tunnel";
  ASSERT_EQ(::send(fd, hello, sizeof hello, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof hello));
  char back[sizeof hello] = {};
  timeval tv{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  size_t got = 0;
  while (got < sizeof back) {
    const ssize_t n = ::recv(fd, back + got, sizeof back - got, 0);
    ASSERT_GT(n, 0);
    got += static_cast<size_t>(n);
  }
  EXPECT_EQ(std::memcmp(back, hello, sizeof hello), 0);
  ::close(fd);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  TunnelStats a = acceptor->stats();
  while ((a.malformed < 2 || a.strays < 1) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the acceptor's counters
    a = acceptor->stats();
  }
  EXPECT_GE(a.malformed, 2u) << "bad magic and version; the window overrun may count a third";
  EXPECT_GE(a.strays, 1u) << "data for tunnel 77, never opened";
  EXPECT_EQ(a.opened, 2u) << "the hostile Worker's Open and the real one";
}

TEST(ControlTunnel, AcceptorGoneEndsTheLocalConnectionWithinTheTimeout) {
  Echo echo;
  auto serverDomain = Loopback(), clientDomain = Loopback();
  std::unique_ptr<ControlTunnel> acceptor, dialer;
  ASSERT_TRUE(ControlTunnel::Accept(*serverDomain, "127.0.0.1", echo.port, {}, &acceptor).ok());
  ASSERT_TRUE(ControlTunnel::Dial(*clientDomain, acceptor->WorkerAddress(), {}, &dialer).ok());
  const int fd = ConnectTo(dialer->LocalAddress());
  char c = 'x';
  ASSERT_EQ(::send(fd, &c, 1, MSG_NOSIGNAL), 1);
  ASSERT_EQ(::recv(fd, &c, 1, 0), 1);  // the tunnel is up
  acceptor.reset();
  serverDomain.reset();
  // The next request has nowhere to go: the dialer's Endpoint fails and the local
  // socket ends (0 or a reset), never a hang (the receive timeout bounds the wait).
  ::send(fd, &c, 1, MSG_NOSIGNAL);
  timeval tv{(kTimeoutMs * 3) / 1000 + 5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  const ssize_t n = ::recv(fd, &c, 1, 0);
  EXPECT_LE(n, 0);
  EXPECT_FALSE(n < 0 && errno == EAGAIN) << "the local connection hung";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (dialer->stats().failed == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling the dialer's counters
  }
  EXPECT_EQ(dialer->stats().failed, 1u);
  EXPECT_NE(dialer->lastError().find("Endpoint failed"), std::string::npos) << dialer->lastError();
  ::close(fd);
}

// A tier client dials the tunnel's local 127.0.0.1:PORT, but its errors name the peer the
// user asked for (ClientOptions::peerName, as TierRoute::PeerName makes it: the host:NAME
// and the relay), never that port. Here the tunnel's far end has no server to reach (the
// tier gone from railyardd), so the expert Open and the snapshot Connect both fail.
TEST(ControlTunnel, ATierClientsErrorsNameThePeerAskedForNotTheTunnelsPort) {
  const std::string asked = "host:h2 (via relay h1)";
  auto serverDomain = Loopback(), clientDomain = Loopback();
  std::unique_ptr<ControlTunnel> acceptor, dialer;
  TunnelOptions ao, dialOptions;
  ao.targetName = "railyardd's expert store";  // as tools/railyardd/tier_tunnels.cc
  dialOptions.peerName = asked;                 // as plugin/tier_route.cc
  const uint16_t targetPort = test_support::FreePort();
  ASSERT_TRUE(ControlTunnel::Accept(*serverDomain, "127.0.0.1", targetPort, ao, &acceptor).ok());
  ASSERT_TRUE(ControlTunnel::Dial(*clientDomain, acceptor->WorkerAddress(), dialOptions, &dialer).ok());
  const std::string local = dialer->LocalAddress();
  const std::string localPort = local.substr(local.rfind(':'));
  std::unique_ptr<fabric::Worker> clientWorker;
  ASSERT_TRUE(clientDomain->CreateWorker(&clientWorker).ok());
  fabric::RegistrationCache cache(*clientDomain);

  std::vector<char> arena(65536);
  expert::ClientOptions eo;
  eo.timeoutMs = kTimeoutMs;
  eo.peerName = asked;
  std::unique_ptr<expert::ExpertClient> expertClient;
  Status s = expert::ExpertClient::Open(local, eo, cache, clientWorker.get(), arena.data(), arena.size(), &expertClient);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(expert::ExpertErrcOf(s), expert::ExpertErrc::kPeerLost) << s.message();
  EXPECT_NE(s.message().find("expert peer " + asked), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find(localPort), std::string::npos) << "names the tunnel's port: " << s.message();
  // The tunnel's own words: the dialer names the peer asked for and what refused there,
  // not the acceptor's loopback port.
  EXPECT_NE(dialer->lastError().find("closed by " + asked + ": railyardd's expert store refused the connection"),
            std::string::npos)
      << dialer->lastError();
  EXPECT_EQ(dialer->lastError().find(std::to_string(targetPort)), std::string::npos) << dialer->lastError();

  snapshot::ClientOptions so;
  so.host = "127.0.0.1";
  so.port = static_cast<uint16_t>(std::stoi(local.substr(local.rfind(':') + 1)));
  so.kind = "kv";
  so.mode = snapshot::Mode::kPaging;
  so.blobBytes = 4096;
  so.arenaBytes = 4 * 4096;
  so.timeoutMs = kTimeoutMs;
  so.peerName = asked;
  std::unique_ptr<snapshot::SnapshotClient> snapshotClient;
  s = snapshot::SnapshotClient::Connect(cache, *clientWorker, so, &snapshotClient);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(asked), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find(localPort), std::string::npos) << "names the tunnel's port: " << s.message();
  EXPECT_GE(acceptor->stats().refused, 1u) << acceptor->lastError();
}

TEST(TunnelWire, DecodeRefusesWhatIsNotATunnelRecord) {
  TunnelRecord r, back;
  std::vector<uint8_t> b;
  r.type = TunnelRecordType::kCredit;
  r.tunnel = 5;
  r.value = 99;
  ASSERT_TRUE(Encode(r, &b).ok());
  ASSERT_TRUE(Decode(b, &back).ok());
  EXPECT_EQ(back.value, 99u);
  EXPECT_EQ(back.tunnel, 5u);
  auto bad = [&](size_t at, uint8_t v) {
    std::vector<uint8_t> x = b;
    x[at] = v;
    return Decode(x, &back).message();
  };
  EXPECT_NE(bad(0, 0).find("magic"), std::string::npos);
  EXPECT_NE(bad(4, 9).find("version 9"), std::string::npos);
  EXPECT_NE(bad(6, 9).find("unknown"), std::string::npos);
  EXPECT_NE(bad(7, 1).find("reserved"), std::string::npos);
  std::vector<uint8_t> withPayload = b;
  withPayload.push_back(1);  // a credit carries no payload
  EXPECT_NE(Decode(withPayload, &back).message().find("payload"), std::string::npos);
  EXPECT_NE(Decode(std::span<const uint8_t>(b.data(), 10), &back).message().find("header"), std::string::npos);
  r.type = TunnelRecordType::kData;
  r.value = 0;
  r.payload.assign(kMaxDataBytes + 1, 0);
  EXPECT_FALSE(Encode(r, &b).ok());
}

}  // namespace
}  // namespace railyard::storage::tunnel
