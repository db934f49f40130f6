// A FrameSocket dialed through a relay, when the relay refuses it: the relay writes
// its RejectRecord and closes at once, so the frames sent after the preamble meet a
// reset (EPIPE or ECONNRESET on the send side) before anything is read. The reason
// is still in the receive queue and is what the error says (CONNECT_FAILED, quoting
// it), not "broken pipe". A relay that closes without a word stays PEER_CLOSED.
//
// The order is forced: the test's relay has written and closed before the socket
// sends a frame, and the socket is pumped with `readable` false (as when epoll has
// not yet reported the input), so the send side sees the reset first.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "proxy/fabric/tcp/frame_socket.h"
#include "proxy/wire.h"
#include "tests/common/free_port.h"

namespace railyard::fabric::tcp {
namespace {

/// Drops what arrives; the sends are what the test watches.
class Drop : public FrameHandler {
 public:
  FabricError OnHeader(int, const FrameHeader&, Sink*) override { return {}; }
  FabricError OnPayload(int, const FrameHeader&, bool) override { return {}; }
  FabricError OnWritten(int, const OutFrame&, bool) override { return {}; }
};

sockaddr_in Loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  return a;
}

/// Dials a loopback "relay" with a 24-byte preamble; the relay reads the preamble,
/// writes `reply` (may be empty) and closes. Then frames are queued and pumped
/// without reading until the socket fails; returns that error.
FabricError FailAfterRelayCloses(const std::vector<uint8_t>& reply, uint16_t* relayPort) {
  const int listener = test_support::ListenLoopback(relayPort);
  EXPECT_GE(listener, 0);
  DialPlan plan;
  plan.local = Loopback(0);
  plan.remote = Loopback(*relayPort);
  plan.preamble.assign(24, 0xAB);
  plan.via = "hR (127.0.0.1:" + std::to_string(*relayPort) + ")";
  std::unique_ptr<FrameSocket> sock;
  FabricError e = FrameSocket::Open(plan, 0, Direction::kToInitiator, &sock);
  EXPECT_TRUE(e.ok()) << e.ToString();
  if (!sock) {
    close(listener);
    return e;
  }
  const int relay = accept(listener, nullptr, nullptr);
  close(listener);
  EXPECT_GE(relay, 0);
  Drop drop;
  FrameSocket::PumpResult r;
  // The connect completes and the preamble goes out; the relay reads all of it.
  std::vector<uint8_t> got(plan.preamble.size());
  size_t have = 0;
  while (have < got.size()) {
    e = sock->Pump(drop, 1 << 20, &r, false);
    EXPECT_TRUE(e.ok()) << e.ToString();
    if (!e.ok()) break;
    const ssize_t n = recv(relay, got.data() + have, got.size() - have, MSG_DONTWAIT);
    if (n > 0) have += static_cast<size_t>(n);
  }
  EXPECT_EQ(got, plan.preamble);
  if (!reply.empty()) {
    EXPECT_EQ(send(relay, reply.data(), reply.size(), MSG_NOSIGNAL), static_cast<ssize_t>(reply.size()));
  }
  close(relay);
  // Frames go out until the reset is seen by a send (the first one after the close is
  // taken by the kernel, the relay answers it with a reset).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    OutFrame f;
    f.header = MakeHeader(FrameType::kRecord);
    f.owned.assign(64, 1);
    f.header.payloadBytes = static_cast<uint32_t>(f.owned.size());
    sock->Queue(std::move(f));
    e = sock->Pump(drop, 1 << 20, &r, false);
    if (!e.ok()) return e;
  }
  ADD_FAILURE() << "the socket never saw the relay's close";
  return {};
}

TEST(FrameSocketRefusal, ARefusalReadAfterTheResetIsTheError) {
  proxy::RejectRecord reject{};
  reject.header = proxy::MakeHeader(proxy::RecordKind::kReject);
  std::snprintf(reject.reason, sizeof reject.reason, "relay on hR: refused: no route to host 7");
  std::vector<uint8_t> reply(sizeof reject);
  std::memcpy(reply.data(), &reject, sizeof reject);
  uint16_t port = 0;
  const FabricError e = FailAfterRelayCloses(reply, &port);
  EXPECT_EQ(e.errc, FabricErrc::kConnectFailed) << e.ToString();
  EXPECT_EQ(e.what, "the relay hR (127.0.0.1:" + std::to_string(port) +
                        ") refused the socket: relay on hR: refused: no route to host 7");
}

TEST(FrameSocketRefusal, ARelayThatClosesWithoutAWordIsPeerClosed) {
  uint16_t port = 0;
  const FabricError e = FailAfterRelayCloses({}, &port);
  EXPECT_EQ(e.errc, FabricErrc::kPeerClosed) << e.ToString();
  EXPECT_NE(e.what.find("send"), std::string::npos) << e.ToString();
}

}  // namespace
}  // namespace railyard::fabric::tcp
