// The verbs transport in one process, in the soft-RoCE lane (tests/lanes/rxe,
// topology 2x2): the sender uses host 0's rails (rxe_h0r*), the receiver host
// 1's (rxe_h1r*), and one thread drives both ends as NCCL's proxy would.
// Covers what the conformance suite cannot see from outside: striping over two
// rails (rail byte counters), several QPs, inline on/off, QP records of another
// version / truncated / not covering the QPs (refused before any QP changes),
// an MTU mismatch, the lane's real GID tables, and a rail taken down mid-transfer.
// Off the lane (no RXE_LANE_DEVS_H0) every test is skipped and the binary exits 77.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "env/config.h"
#include "proxy/verbs/ib_ports.h"
#include "proxy/verbs/verbs_setup.h"
#include "topology/discovery.h"

namespace railyard::proxy::verbs {
namespace {

using Ms = std::chrono::milliseconds;

bool InLane() { return std::getenv("RXE_LANE_DEVS_H0") != nullptr; }

/// The process's ports: every rxe device of the lane (h0r0 h0r1 h1r0 h1r1).
IbPorts& Ports() {
  static IbPorts* ports = [] {
    static env::Config cfg;
    cfg.gidIndex = -1;
    cfg.roceVersion = 2;
    cfg.addrFamily = AF_INET;
    cfg.defaultSpeedMbps = 10000;
    std::unique_ptr<IbPorts> p;
    Status s = IbPorts::Open(cfg, &p, nullptr);
    if (!s.ok()) {
      ADD_FAILURE() << s.message();
      return static_cast<IbPorts*>(nullptr);
    }
    GlobalMrCache().SetBackend(p.get());
    EXPECT_TRUE(p->StartEvents().ok());
    return p.release();
  }();
  return *ports;
}

int PortIndex(const std::string& device) {
  for (size_t i = 0; i < Ports().size(); ++i) {
    if (Ports().at(i).device == device) return static_cast<int>(i);
  }
  ADD_FAILURE() << "no port " << device;
  return -1;
}

/// Reads an integer sysfs/ procfs file; -1 when unreadable.
long long ReadNumber(const std::string& path) {
  std::ifstream f(path);
  long long v = -1;
  f >> v;
  return v;
}

/// Bytes the netdev of a rail sent (its veth's tx counter).
long long TxBytes(const std::string& netdev) {
  return ReadNumber("/sys/class/net/" + netdev + "/statistics/tx_bytes");
}

struct Pair {
  std::unique_ptr<VerbsListenComm> listen;
  std::unique_ptr<SendComm> send;
  std::unique_ptr<RecvComm> recv;
};

VerbsDeviceSetup DeviceSetup(std::vector<std::string> devices, int qps, bool inlineOn) {
  VerbsDeviceSetup s;
  s.ib = &Ports();
  for (const auto& d : devices) s.ports.push_back(PortIndex(d));
  s.link.qpsPerConn = qps;
  s.options.timeoutMs = 8000;
  s.options.useInline = inlineOn;
  s.options.device = devices[0];
  return s;
}

sockaddr_storage Loopback(socklen_t* len) {
  sockaddr_storage ss{};
  auto* a = reinterpret_cast<sockaddr_in*>(&ss);
  a->sin_family = AF_INET;
  a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  *len = sizeof(sockaddr_in);
  return ss;
}

/// Connects sender (h0 devices) to receiver (h1 devices), driving both ends.
Status Connect(const VerbsDeviceSetup& tx, const VerbsDeviceSetup& rx, Pair* out) {
  socklen_t len = 0;
  sockaddr_storage lo = Loopback(&len);
  ListenAddress addr;
  TcpOptions tcp;
  tcp.timeoutMs = 8000;
  RY_RETURN_IF_ERROR(VerbsListenComm::Create(lo, len, rx, tcp, "h1", &out->listen, &addr));
  std::unique_ptr<VerbsConnector> c;
  RY_RETURN_IF_ERROR(VerbsConnector::Start(addr, tx, tcp, "h0", &c));
  SendComm* s = nullptr;
  RecvComm* r = nullptr;
  const auto deadline = Clock::now() + Ms(20000);
  while ((s == nullptr || r == nullptr) && Clock::now() < deadline) {
    if (s == nullptr) RY_RETURN_IF_ERROR(c->Progress(&s));
    if (r == nullptr) RY_RETURN_IF_ERROR(out->listen->Accept(&r));
  }
  out->send.reset(s);
  out->recv.reset(r);
  if (s == nullptr || r == nullptr) return RemoteError("verbs connection did not complete in 20 s");
  return Status::Ok();
}

/// Sends `size` bytes of a pattern and receives them; checks every byte and size.
/// Returns the first error either end reported.
Status Transfer(Pair& p, size_t size, uint8_t seed) {
  std::vector<uint8_t> src(size + 1), dst(size + 1, 0xee);
  for (size_t i = 0; i < size; ++i) src[i] = static_cast<uint8_t>(i * 131 + seed);
  MemoryRegion* smr = nullptr;
  MemoryRegion* rmr = nullptr;
  RY_RETURN_IF_ERROR(GlobalMrCache().Register(src.data(), src.size(), 1, &smr));
  RY_RETURN_IF_ERROR(GlobalMrCache().Register(dst.data(), dst.size(), 1, &rmr));
  Request* rreq = nullptr;
  Request* sreq = nullptr;
  void* data = dst.data();
  size_t rsize = dst.size();
  int tag = 7;
  Status st = p.recv->Irecv(1, &data, &rsize, &tag, &rmr, &rreq);
  int sdone = 0, rdone = 0, got = -1, sent = -1;
  const auto deadline = Clock::now() + Ms(60000);
  while (st.ok() && (!sdone || !rdone) && Clock::now() < deadline) {
    if (sreq == nullptr) st = p.send->Isend(src.data(), size, 7, smr, &sreq);
    if (st.ok() && sreq != nullptr && !sdone) st = p.send->Test(sreq, &sdone, &sent);
    if (st.ok() && !rdone) st = p.recv->Test(rreq, &rdone, &got);
  }
  if (st.ok() && (!sdone || !rdone)) st = RemoteError("transfer of " + std::to_string(size) + " bytes hung");
  if (st.ok() && (got != static_cast<int>(size) || sent != static_cast<int>(size))) {
    st = InternalError("sizes: sent " + std::to_string(sent) + " received " + std::to_string(got));
  }
  if (st.ok() && std::memcmp(src.data(), dst.data(), size) != 0) st = InternalError("payload differs");
  if (st.ok() && dst[size] != 0xee) st = InternalError("a byte past the message was written");
  (void)GlobalMrCache().Deregister(smr);
  (void)GlobalMrCache().Deregister(rmr);
  return st;
}

class VerbsTransport : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!InLane()) GTEST_SKIP() << "no soft-RoCE lane (RXE_LANE_DEVS_H0 unset)";
    ASSERT_GE(Ports().size(), 4u) << "the 2x2 lane has 4 rxe ports";
  }
};

TEST_F(VerbsTransport, OneRailEverySizeInlineOnAndOff) {
  for (bool inlineOn : {true, false}) {
    Pair p;
    ASSERT_TRUE(Connect(DeviceSetup({"rxe_h0r0"}, 1, inlineOn), DeviceSetup({"rxe_h1r0"}, 1, inlineOn), &p).ok());
    uint8_t seed = 1;
    for (size_t size : {size_t{0}, size_t{1}, size_t{8}, size_t{63}, size_t{4095}, size_t{65536},
                        size_t{1} << 20, (size_t{3} << 20) + 5}) {
      Status s = Transfer(p, size, seed++);
      EXPECT_TRUE(s.ok()) << "inline " << inlineOn << " size " << size << ": " << s.message();
    }
  }
}

TEST_F(VerbsTransport, ManyQpsOnOneRail) {
  Pair p;
  ASSERT_TRUE(Connect(DeviceSetup({"rxe_h0r0"}, 4, true), DeviceSetup({"rxe_h1r0"}, 1, true), &p).ok());
  for (size_t size : {size_t{100}, size_t{1} << 20, (size_t{4} << 20) + 77}) {
    Status s = Transfer(p, size, 9);
    EXPECT_TRUE(s.ok()) << size << ": " << s.message();
  }
}

TEST_F(VerbsTransport, StripesOverTwoRails) {
  Pair p;
  Status c = Connect(DeviceSetup({"rxe_h0r0", "rxe_h0r1"}, 1, true), DeviceSetup({"rxe_h1r0", "rxe_h1r1"}, 1, true), &p);
  ASSERT_TRUE(c.ok()) << c.message();
  const long long tx0 = TxBytes("h0r0"), tx1 = TxBytes("h0r1");
  ASSERT_GE(tx0, 0);
  ASSERT_GE(tx1, 0);
  const size_t size = 8u << 20;
  Status s = Transfer(p, size, 3);
  ASSERT_TRUE(s.ok()) << s.message();
  const long long d0 = TxBytes("h0r0") - tx0, d1 = TxBytes("h0r1") - tx1;
  // Two QPs, one per rail, each carrying half the message (plus headers).
  EXPECT_GE(d0, static_cast<long long>(size / 2)) << "rail 0 carried " << d0 << " bytes";
  EXPECT_GE(d1, static_cast<long long>(size / 2)) << "rail 1 carried " << d1 << " bytes";
  EXPECT_LT(d0, static_cast<long long>(size)) << "rail 0 carried everything";
}

TEST_F(VerbsTransport, LaneGidTablesPickTheIpv4RoceV2Entry) {
  // In the lane, index 0 is the link-local GID and index 1 ::ffff:10.77.r.(h+1).
  for (size_t i = 0; i < Ports().size(); ++i) {
    const GidChoice g = Ports().at(i).Gid();
    ASSERT_TRUE(g.ok()) << Ports().at(i).Name() << ": " << g.error;
    EXPECT_EQ(g.index, 1) << Ports().at(i).Name() << ": " << g.reason;
    EXPECT_TRUE(g.gid.ipv4Mapped) << g.reason;
    EXPECT_EQ(g.type, GidType::kRoceV2);
  }
}

/// Opens a raw control socket to `listen` (the hello of a verbs connector) and
/// sends `record`; returns the listener's Accept status once it fails.
Status FeedListener(VerbsListenComm& listen, const ListenAddress& addr, const std::vector<char>& record) {
  TcpOptions tcp;
  tcp.nsocks = 0;
  tcp.timeoutMs = 5000;
  std::unique_ptr<TcpConnector> c;
  RY_RETURN_IF_ERROR(TcpConnector::Start(addr, tcp, "fake", &c));
  TcpConnection conn;
  bool done = false;
  RecvComm* comm = nullptr;
  const auto deadline = Clock::now() + Ms(10000);
  while (!done && Clock::now() < deadline) {
    RY_RETURN_IF_ERROR(c->ProgressConnection(&conn, &done));
    RY_RETURN_IF_ERROR(listen.Accept(&comm));
  }
  size_t sent = 0;
  RY_RETURN_IF_ERROR(TrySend(conn.control.get(), record.data(), record.size(), &sent));
  if (record.size() < sizeof(QpSetHeader)) conn.control.Shutdown();  // a truncated record then EOF
  while (Clock::now() < deadline) {
    Status s = listen.Accept(&comm);
    if (!s.ok()) return s;
    if (comm != nullptr) return InternalError("the listener accepted a bad record");
  }
  return InternalError("the listener neither accepted nor refused in 10 s");
}

QpSet FakeSet(int nqps) {
  QpSet s;
  s.fifoAddr = 0x1000;
  QpRailWire r{};
  r.mtu = 3;
  r.port = 1;
  std::strncpy(r.device, "fake0", sizeof r.device - 1);
  s.rails.push_back(r);
  for (int i = 0; i < nqps; ++i) s.qps.push_back(QpWire{static_cast<uint32_t>(100 + i), 1, 0, {}});
  return s;
}

TEST_F(VerbsTransport, ListenerRefusesBadRecordsBeforeTouchingQps) {
  socklen_t len = 0;
  sockaddr_storage lo = Loopback(&len);
  std::unique_ptr<VerbsListenComm> listen;
  ListenAddress addr;
  ASSERT_TRUE(VerbsListenComm::Create(lo, len, DeviceSetup({"rxe_h1r0"}, 1, true), TcpOptions{}, "h1", &listen, &addr).ok());

  std::vector<char> wrongVersion = EncodeQpSet(FakeSet(1));
  reinterpret_cast<QpSetHeader*>(wrongVersion.data())->qpVersion = kQpRecordVersion + 1;
  Status s = FeedListener(*listen, addr, wrongVersion);
  EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
  EXPECT_NE(s.message().find("QP record version 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no QP was created"), std::string::npos) << s.message();

  std::vector<char> truncated = EncodeQpSet(FakeSet(2));
  truncated.resize(sizeof(QpSetHeader) + 10);
  reinterpret_cast<QpSetHeader*>(truncated.data())->bytes = static_cast<uint32_t>(QpSetBytes(FakeSet(2)));
  std::vector<char> head(truncated.begin(), truncated.end());
  s = FeedListener(*listen, addr, std::vector<char>(head.begin(), head.begin() + 20));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("closed"), std::string::npos) << s.message();
}

TEST_F(VerbsTransport, ConnectorRefusesAReplyThatDoesNotCoverItsQps) {
  // A fake listener: accepts the control socket, reads the connector's set, answers
  // with a set of 1 QP where the connector made 2.
  socklen_t len = 0;
  sockaddr_storage lo = Loopback(&len);
  std::unique_ptr<TcpListenComm> fake;
  ListenAddress addr;
  TcpOptions tcp;
  tcp.nsocks = 0;
  ASSERT_TRUE(TcpListenComm::Create(lo, len, tcp, "fake", &GlobalMrCache(), &fake, &addr).ok());
  addr.verbsRails = 1;
  std::unique_ptr<VerbsConnector> c;
  ASSERT_TRUE(VerbsConnector::Start(addr, DeviceSetup({"rxe_h0r0"}, 2, true), tcp, "h0", &c).ok());
  TcpConnection conn;
  bool got = false;
  SendComm* comm = nullptr;
  RecordReader reader;
  bool read = false;
  Status s;
  const auto deadline = Clock::now() + Ms(10000);
  while (s.ok() && !read && Clock::now() < deadline) {
    s = c->Progress(&comm);
    if (!got) {
      ASSERT_TRUE(fake->AcceptConnection(&conn, &got).ok());
    }
    if (got) {
      ASSERT_TRUE(reader.Read(conn.control.get(), "connector", &read).ok());
    }
  }
  ASSERT_TRUE(read);
  QpSet theirs;
  ASSERT_TRUE(DecodeQpSet(reader.bytes().data(), reader.bytes().size(), 0, &theirs).ok());
  EXPECT_EQ(theirs.qps.size(), 2u);
  QpSet reply = FakeSet(1);
  reply.ringEntries = kRingEntries;
  reply.ringAddr = 0x2000;
  const std::vector<char> bytes = EncodeQpSet(reply);
  size_t sent = 0;
  ASSERT_TRUE(TrySend(conn.control.get(), bytes.data(), bytes.size(), &sent).ok());
  while (s.ok() && comm == nullptr && Clock::now() < deadline) s = c->Progress(&comm);
  EXPECT_EQ(s.code(), Code::kInvalidUsage) << s.message();
  EXPECT_NE(s.message().find("covers 1 QPs, the connection has 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("no QP was modified"), std::string::npos) << s.message();
}

/// Runs `cmd` with /bin/sh; true on exit status 0.
bool Sh(const std::string& cmd) { return std::system(cmd.c_str()) == 0; }

TEST_F(VerbsTransport, MtuMismatchUsesTheSmallerOnBothEnds) {
  // rxe derives the active MTU from the netdev's: 1500 -> 1024, 4200 -> 4096 bytes.
  const long long before = ReadNumber("/sys/class/net/h1r1/mtu");
  ASSERT_TRUE(Sh("ip link set h0r1 mtu 4200 && ip link set h1r1 mtu 1500"));
  // Ports cache their active MTU at open: read what the kernel reports now.
  ibv_port_attr a0{}, a1{};
  ASSERT_EQ(ibv_query_port(Ports().at(PortIndex("rxe_h0r1")).ctx, 1, &a0), 0);
  ASSERT_EQ(ibv_query_port(Ports().at(PortIndex("rxe_h1r1")).ctx, 1, &a1), 0);
  Ports().at(PortIndex("rxe_h0r1")).activeMtu = static_cast<IbMtu>(a0.active_mtu);
  Ports().at(PortIndex("rxe_h1r1")).activeMtu = static_cast<IbMtu>(a1.active_mtu);
  EXPECT_EQ(a0.active_mtu, IBV_MTU_4096);
  EXPECT_EQ(a1.active_mtu, IBV_MTU_1024);
  Pair p;
  Status c = Connect(DeviceSetup({"rxe_h0r1"}, 1, true), DeviceSetup({"rxe_h1r1"}, 1, true), &p);
  ASSERT_TRUE(c.ok()) << c.message();
  Status s = Transfer(p, (1u << 20) + 3, 5);
  EXPECT_TRUE(s.ok()) << s.message();
  (void)Sh("ip link set h0r1 mtu " + std::to_string(before) + " && ip link set h1r1 mtu " + std::to_string(before));
}

TEST_F(VerbsTransport, RailDownMidTransferFailsNamingTheRail) {
  Pair p;
  ASSERT_TRUE(Connect(DeviceSetup({"rxe_h0r0"}, 1, true), DeviceSetup({"rxe_h1r0"}, 1, true), &p).ok());
  ASSERT_TRUE(Transfer(p, 4096, 1).ok());
  // Take the sender's rail down from another thread while a large transfer runs.
  std::thread cut([] { (void)Sh("sleep 0.3; ip link set h0r0 down"); });
  const auto t0 = Clock::now();
  Status s = Transfer(p, 64u << 20, 2);
  cut.join();
  const auto took = std::chrono::duration_cast<Ms>(Clock::now() - t0).count();
  (void)Sh("ip link set h0r0 up");
  ASSERT_FALSE(s.ok()) << "a 64 MiB transfer survived its rail going down";
  // Downing one veth end takes its peer's carrier too: either end may see it first.
  EXPECT_TRUE(s.message().find("rxe_h0r0") != std::string::npos ||
              s.message().find("rxe_h1r0") != std::string::npos) << s.message();
  EXPECT_NE(s.message().find("seq "), std::string::npos) << s.message();
  EXPECT_LT(took, 60000) << s.message();
}

TEST_F(VerbsTransport, IflushReadsBackGpuRegionsAndSkipsHostOnes) {
  Pair p;
  ASSERT_TRUE(Connect(DeviceSetup({"rxe_h0r0"}, 1, true), DeviceSetup({"rxe_h1r0"}, 1, true), &p).ok());
  std::vector<uint8_t> buf(8192, 7);
  void* data = buf.data();
  int size = 4096;
  // Host memory (NCCL_PTR_HOST = 1): nothing to flush.
  MemoryRegion* host = nullptr;
  ASSERT_TRUE(GlobalMrCache().Register(buf.data(), buf.size(), 1, &host).ok());
  Request* req = reinterpret_cast<Request*>(0x1);
  ASSERT_TRUE(p.recv->Iflush(1, &data, &size, &host, &req).ok());
  EXPECT_EQ(req, nullptr);
  // A region registered as GPU memory (NCCL_PTR_CUDA = 2; host pages stand in for it
  // here): a READ per rail on the loop-back QP, completed through test().
  MemoryRegion* gpu = nullptr;
  ASSERT_TRUE(GlobalMrCache().Register(buf.data(), buf.size(), 2, &gpu).ok());
  ASSERT_TRUE(p.recv->Iflush(1, &data, &size, &gpu, &req).ok());
  ASSERT_NE(req, nullptr);
  int done = 0;
  const auto deadline = Clock::now() + Ms(20000);
  Status s;
  while (s.ok() && !done && Clock::now() < deadline) s = p.recv->Test(req, &done, nullptr);
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(done, 1);
  // A receive of 0 bytes needs no flush either.
  int zero = 0;
  ASSERT_TRUE(p.recv->Iflush(1, &data, &zero, &gpu, &req).ok());
  EXPECT_EQ(req, nullptr);
  (void)GlobalMrCache().Deregister(host);
  (void)GlobalMrCache().Deregister(gpu);
}

TEST_F(VerbsTransport, GidChangeReresolvesTheGid) {
  IbPort& port = Ports().at(static_cast<size_t>(PortIndex("rxe_h0r1")));
  const GidChoice before = port.Gid();
  ASSERT_TRUE(before.ok());
  // Move h0r1 to an address on another subnet (a secondary address on the same
  // subnet would vanish with the primary): its IPv4 GID goes away and a new one
  // appears; the event thread sees IBV_EVENT_GID_CHANGE and chooses again.
  ASSERT_TRUE(Sh("ip addr add 10.77.51.1/24 dev h0r1 && ip addr del 10.77.1.1/24 dev h0r1"));
  const auto deadline = Clock::now() + Ms(20000);
  GidChoice after = port.Gid();
  while (Clock::now() < deadline && after.gid.raw == before.gid.raw) {
    std::this_thread::sleep_for(Ms(50));  // polling the event thread's result, not a barrier
    after = port.Gid();
  }
  (void)Sh("ip addr add 10.77.1.1/24 dev h0r1; ip addr del 10.77.51.1/24 dev h0r1");
  ASSERT_TRUE(after.ok()) << after.error;
  EXPECT_NE(after.gid.raw, before.gid.raw) << "the GID was not re-resolved after the address change";
  EXPECT_NE(after.reason.find("10.77.51.1"), std::string::npos) << after.reason;
}

}  // namespace
}  // namespace railyard::proxy::verbs

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (std::getenv("RXE_LANE_DEVS_H0") == nullptr) {
    std::fprintf(stderr, "verbs_transport_test: no soft-RoCE lane here (RXE_LANE_DEVS_H0 unset); skipped "
                         "(run it in the lane: tests/lanes/run-verbs.sh BUILD_DIR)\n");
    return 77;
  }
  return RUN_ALL_TESTS();
}
