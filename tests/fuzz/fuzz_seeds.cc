// railyard-fuzz-seeds: writes the committed seed corpus of the fuzz targets
// (tests/fuzz/corpus/<target>/), valid records built with Railyard's own
// encoders where it has them (EncodeHandle, EncodeQpSet, MakeHeader) and by the
// documented layout where it does not (the cabling datagrams of
// topology/cabling_agent.cc). Files named ok-* must be accepted by their target
// and bad-* refused; fuzz_replay_test checks both, so a format change that
// stales the seeds fails a test. Usage: railyard-fuzz-seeds DIR (DIR/<target>/
// is created; existing files of the same names are overwritten).
#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <cstring>
#include <string>
#include <vector>

#include "proxy/collectives/coll_wire.h"
#include "proxy/fabric/relay/relay_wire.h"
#include "proxy/fabric/remote_key.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/verbs/verbs_wire.h"
#include "proxy/gin/gin_wire.h"
#include "proxy/handle.h"
#include "proxy/runtime/cable_set_domain.h"
#include "proxy/nccl/nccl_records.h"
#include "storage/expert/manifest.h"
#include "storage/snapshot/snapshot_wire.h"
#include "proxy/verbs/qp_record.h"
#include "proxy/wire.h"
#include "topology/cluster_key.h"
#include "tests/fuzz/ring_graph.h"

namespace p = railyard::proxy;
namespace v = railyard::proxy::verbs;

namespace {

using Bytes = std::vector<uint8_t>;
std::string g_dir;

template <typename T>
void Put(Bytes& b, const T& v) {
  const auto* p8 = reinterpret_cast<const uint8_t*>(&v);
  b.insert(b.end(), p8, p8 + sizeof v);
}
void PutStr(Bytes& b, const std::string& s, size_t field) {
  Bytes f(field, 0);
  std::memcpy(f.data(), s.data(), std::min(s.size(), field - 1));
  b.insert(b.end(), f.begin(), f.end());
}

bool Write(const std::string& target, const std::string& name, const Bytes& b) {
  const std::string dir = g_dir + "/" + target;
  ::mkdir(dir.c_str(), 0755);
  const std::string path = dir + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) {
    std::perror(path.c_str());
    return false;
  }
  const bool ok = std::fwrite(b.data(), 1, b.size(), f) == b.size();
  return std::fclose(f) == 0 && ok;
}

// ---- handle
Bytes Handle(int family, int nrails, void (*tweak)(uint8_t*) = nullptr) {
  p::ListenAddress a;
  a.listenId = 0x1122334455667788ull;
  a.pid = 4242;
  a.host = "spark-1";
  a.hostId = 0xabcdef0123456789ull;
  a.verbsRails = 2;
  for (int i = 0; i < nrails; ++i) a.rails.push_back(in_addr{htonl(0x0a000001u + (i << 8))});
  if (family == AF_INET) {
    auto* s = reinterpret_cast<sockaddr_in*>(&a.addr);
    s->sin_family = AF_INET;
    s->sin_port = htons(5000);
    s->sin_addr.s_addr = htonl(0x0a000001u);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&a.addr);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(5001);
    s->sin6_addr.s6_addr[15] = 1;
  }
  Bytes b(p::kHandleBytes);
  p::EncodeHandle(a, b.data());
  if (tweak) tweak(b.data());
  return b;
}

// ---- records / chunk_stream: PostedBuffers plan: receives-1, then per receive
// n-1 and per buffer (size/8 - 1) as uint16.
Bytes Plan(const std::vector<std::vector<uint16_t>>& receives) {
  Bytes b;
  Put<uint8_t>(b, static_cast<uint8_t>(receives.size() - 1));
  for (const auto& r : receives) {
    Put<uint8_t>(b, static_cast<uint8_t>(r.size() - 1));
    for (uint16_t sz : r) Put<uint16_t>(b, static_cast<uint16_t>(sz / 8 - 1));
  }
  return b;
}
p::ChunkHeader Chunk(uint64_t seq, uint32_t slot, uint64_t offset, uint32_t len, uint64_t total) {
  p::ChunkHeader h{};
  h.header = p::MakeHeader(p::RecordKind::kChunk);
  h.seq = seq;
  h.slot = slot;
  h.addr = offset;  // the targets add the arena's base
  h.len = len;
  h.total = total;
  h.rkey = 1;  // the first region of a fresh MrCache
  return h;
}
p::CtsRecord Cts(uint64_t seq, std::vector<std::pair<uint64_t, int>> bufs) {
  p::CtsRecord c{};
  c.header = p::MakeHeader(p::RecordKind::kCts);
  c.seq = seq;
  c.n = static_cast<uint32_t>(bufs.size());
  for (size_t i = 0; i < bufs.size(); ++i) c.entries[i] = {0x7f0000001000ull + i * 0x10000, bufs[i].first, 9, bufs[i].second};
  return c;
}

// ---- listener
Bytes Hello(uint64_t connId, uint16_t sockIndex, uint16_t nsocks, uint16_t version = p::kProtocolVersion) {
  p::HelloRecord h{};
  h.header = p::MakeHeader(p::RecordKind::kHello);
  h.header.version = version;
  h.connId = connId;
  h.sockIndex = sockIndex;
  h.nsocks = nsocks;
  h.pid = 777;
  p::CopyHostName("spark-2", h.host);
  Bytes b;
  Put(b, h);
  return b;
}

// ---- qp_record
Bytes QpSet(uint8_t expected, int rails, int qps, uint8_t mtu = 3) {
  v::QpSet s;
  s.trafficClass = 106;
  s.serviceLevel = 3;
  s.fifoAddr = 0x7f0000100000ull;
  for (int r = 0; r < rails; ++r) {
    v::QpRailWire w{};
    w.gid[10] = 0xff;
    w.gid[11] = 0xff;
    w.gid[12] = 10;
    w.gid[15] = static_cast<uint8_t>(r + 1);
    w.fifoRkey = 100 + static_cast<uint32_t>(r);
    w.mtu = mtu;
    w.linkLayer = 2;  // Ethernet (RoCE)
    w.port = 1;
    std::snprintf(w.device, sizeof w.device, "rxe%d", r);
    s.rails.push_back(w);
  }
  for (int q = 0; q < qps; ++q) s.qps.push_back({static_cast<uint32_t>(0x100 + q), static_cast<uint32_t>(q * 1000), static_cast<uint8_t>(q % rails), {}});
  Bytes b{expected};
  const std::vector<char> e = v::EncodeQpSet(s);
  b.insert(b.end(), e.begin(), e.end());
  return b;
}

// ---- cabling, wire version 2 (layout of topology/cabling_agent.cc: an 80-byte
// WireHeader, a WireHello or a record of WireLinks, a 32-byte MAC when flagged)
constexpr uint32_t kCablingMagic = 0x42435952u;  // "RYCB"
constexpr uint64_t kSpeaker = 0x5bea4e25bea4e2ull;
/// The cluster key of the keyed seeds; the relay_record target holds the same secret.
constexpr const char* kFuzzClusterSecret = "railyard-fuzz-cluster-key-0123456789abcdef";
const railyard::topology::ClusterKey& FuzzKey() {
  static std::shared_ptr<const railyard::topology::ClusterKey> key = [] {
    std::shared_ptr<const railyard::topology::ClusterKey> k;
    if (!railyard::topology::ClusterKey::FromSecret(kFuzzClusterSecret, &k).ok()) std::abort();
    return k;
  }();
  return *key;
}
Bytes CablingDatagram(uint16_t kind, uint64_t origin, uint64_t seq, const std::string& name, const Bytes& body,
                      bool mac = false, uint16_t version = 2) {
  Bytes b;
  Put<uint32_t>(b, kCablingMagic);
  Put<uint16_t>(b, version);
  Put<uint16_t>(b, kind);
  Put<uint64_t>(b, origin);
  Put<uint64_t>(b, kSpeaker);
  Put<uint64_t>(b, seq);
  Put<uint32_t>(b, mac ? 1 : 0);  // flags: kFlagMac
  Put<uint32_t>(b, static_cast<uint32_t>(body.size()));
  Put<uint32_t>(b, 0);  // ageMs
  Put<uint32_t>(b, 0);  // reserved
  PutStr(b, name, 32);
  b.insert(b.end(), body.begin(), body.end());
  if (mac) {
    railyard::topology::ClusterMac m{};
    if (!FuzzKey().Mac("railyard.cabling.v2", b.data(), b.size(), &m)) std::abort();
    b.insert(b.end(), m.begin(), m.end());
  }
  return b;
}
Bytes CablingHello(uint64_t origin, const std::string& name, const std::string& ifname, uint32_t addr,
                   bool mac = false) {
  Bytes body;
  PutStr(body, ifname, 16);
  Put<uint32_t>(body, htonl(addr));
  Put<uint32_t>(body, 200000);
  return CablingDatagram(1, origin, 0, name, body, mac);
}
struct SeedLink {
  std::string ifname, peerIfname;
  uint64_t peerHost;
  uint32_t addr, peerAddr;
};
Bytes CablingRecord(uint64_t origin, uint64_t seq, const std::string& name, const std::vector<SeedLink>& links,
                    bool mac = false) {
  Bytes body;
  Put<uint32_t>(body, static_cast<uint32_t>(links.size()));
  Put<uint32_t>(body, 0);
  for (const SeedLink& l : links) {
    PutStr(body, l.ifname, 16);
    PutStr(body, l.peerIfname, 16);
    Put<uint64_t>(body, l.peerHost);
    Put<uint32_t>(body, htonl(l.addr));
    Put<uint32_t>(body, htonl(l.peerAddr));
    Put<uint32_t>(body, 200000);
    Put<uint32_t>(body, 0);
  }
  return CablingDatagram(2, origin, seq, name, body, mac);
}
void Framed(Bytes& out, const Bytes& datagram) {
  Put<uint16_t>(out, static_cast<uint16_t>(datagram.size()));
  out.insert(out.end(), datagram.begin(), datagram.end());
}

// ---- the decoders above railyard_core: fabric comms records, relayed Endpoints,
// GIN, collectives, snapshot and expert tiers, the fabric's TCP and verbs wires.
railyard::fabric::RemoteKey Key(uint64_t base, uint64_t length, size_t rails = 0) {
  railyard::fabric::RemoteKey k;
  k.base = base;
  k.length = length;
  k.softwareKey = 0x5eed;
  k.access = 0;
  for (size_t i = 0; i < rails; ++i) k.railRkeys.push_back(0x100 + static_cast<uint32_t>(i));
  return k;
}

Bytes TcpAddress(uint16_t port) {
  railyard::fabric::tcp::WorkerAddress a;
  a.workerId = 0x77;
  a.rails.push_back({htonl(0x7f000001), port, 10000});
  return a.Pack();
}

/// relay_reply (tests/fuzz/relay_reply_fuzz.cc): byte 0 (low 3 bits 0: stay silent,
/// else close), then what the relay sends back.
bool RelayReplySeeds() {
  namespace t = railyard::fabric::tcp;
  bool ok = true;
  auto reject = [](const std::string& reason, size_t cut) {
    railyard::proxy::RejectRecord r{};
    r.header = {railyard::proxy::kMagic, railyard::proxy::kProtocolVersion,
                static_cast<uint16_t>(railyard::proxy::RecordKind::kReject)};
    std::snprintf(r.reason, sizeof r.reason, "%s", reason.c_str());
    Bytes b{1};
    Put(b, r);
    b.resize(std::min(b.size(), 1 + cut));
    return b;
  };
  ok &= Write("relay_reply", "reject-no-route", reject("no route to h3 from h1 (cabling graph)", 128));
  ok &= Write("relay_reply", "reject-cut-after-header", reject("a reason cut after the frame header's room", 64));
  ok &= Write("relay_reply", "reject-short-of-a-header", reject("short", 40));
  Bytes acks{1};
  t::FrameHeader ack = t::MakeHeader(t::FrameType::kAck);
  ack.seq = 0;
  Put(acks, ack);
  ok &= Write("relay_reply", "ack-of-the-send-then-close", acks);
  Bytes silent{0};
  Put(silent, ack);
  ok &= Write("relay_reply", "ack-of-the-send-then-silence", silent);
  ok &= Write("relay_reply", "garbage-then-close", Bytes{3, 'G', 'E', 'T', ' ', '/', ' ', 'H', 'T', 'T', 'P'});
  return ok;
}

/// cable_address (tests/fuzz/cable_address_fuzz.cc): byte 0 selects the decision,
/// this host and its verbs cables; the rest is a peer's address over RingOf4.
bool CableAddressSeeds() {
  namespace rt = railyard::runtime;
  namespace fz = railyard::fuzz;
  bool ok = true;
  auto host = [](std::vector<std::pair<std::string, bool>> rails) {
    rt::HostAddress a;
    a.workerId = 0x42;
    uint8_t index = 0;
    for (const auto& [ip, verbs] : rails) a.rails.push_back({fz::RingIp(ip), 40000, verbs, index++});
    return a.Pack();
  };
  auto select = [](int decision, uint64_t self, int verbsCables, const Bytes& rest) {
    Bytes b{static_cast<uint8_t>(decision | (self - 1) << 1 | verbsCables << 3)};
    b.insert(b.end(), rest.begin(), rest.end());
    return b;
  };
  // From h0 (id 1), h2's (id 3) rails on its cables to h1 and h3: two relayed groups.
  ok &= Write("cable_address", "ok-tcp-opposite-two-cables",
              select(0, 1, 0, host({{"10.1.0.2", false}, {"10.1.1.2", false}, {"10.2.0.1", false}, {"10.2.1.1", false}})));
  ok &= Write("cable_address", "ok-verbs-neighbour", select(0, 2, 0, host({{"10.1.0.2", true}, {"10.1.1.2", true}})));
  ok &= Write("cable_address", "bad-transports-mixed-on-one-cable",
              select(0, 1, 0, host({{"10.1.0.2", true}, {"10.1.1.2", false}})));
  ok &= Write("cable_address", "bad-unknown-rail-address", select(0, 1, 0, host({{"10.9.9.9", false}})));
  // A Worker that started with no cable lists its host-local rail first (transport 2,
  // on 127/8): with cable rails after it the cables route; alone it routes nowhere.
  rt::HostAddress local;
  local.workerId = 0x45;
  local.rails.push_back({htonl(0x7f0a0b0c), 40002, false, 0, true});
  ok &= Write("cable_address", "bad-host-local-rail-only", select(0, 1, 0, local.Pack()));
  local.rails.push_back({fz::RingIp("10.1.0.2"), 40000, false, 1});
  ok &= Write("cable_address", "ok-host-local-rail-then-a-cable", select(0, 1, 0, local.Pack()));
  Bytes index = host({{"10.1.0.2", false}});
  index.back() = 16;  // the rail index byte: 0..15
  ok &= Write("cable_address", "bad-rail-index-16", select(0, 1, 0, index));
  // At relay h1 (id 2): h2's TCP Worker on the cable to h1 (straight), on its cable to
  // h3 (relayed on), and a verbs Worker there with and without verbs ports here.
  railyard::fabric::tcp::WorkerAddress w;
  w.workerId = 0x43;
  w.rails = {{fz::RingIp("10.1.0.2"), 40001, 10000}, {fz::RingIp("10.1.1.2"), 40001, 10000}};
  ok &= Write("cable_address", "ok-resolve-straight", select(1, 2, 0, w.Pack()));
  w.rails = {{fz::RingIp("10.2.0.1"), 40001, 10000}, {fz::RingIp("10.2.1.1"), 40001, 10000}};
  ok &= Write("cable_address", "ok-resolve-relayed-on", select(1, 2, 0, w.Pack()));
  railyard::fabric::verbs::VerbsAddress v;
  v.workerId = 0x44;
  v.ipv4 = fz::RingIp("10.2.0.1");
  v.port = 40100;
  v.rails = 2;
  ok &= Write("cable_address", "ok-resolve-verbs-relayed-on", select(1, 2, 3, v.Pack()));
  w.rails = {{fz::RingIp("10.1.0.1"), 29519, 10000}};
  ok &= Write("cable_address", "resolve-own-forwarder-port", select(1, 2, 0, w.Pack()));
  w.rails = {{fz::RingIp("10.9.9.9"), 40001, 10000}};
  ok &= Write("cable_address", "bad-resolve-unknown-address", select(1, 2, 3, w.Pack()));
  return ok;
}

bool FabricSeeds() {
  namespace n = railyard::proxy::nccl;
  namespace r = railyard::fabric::relay;
  namespace g = railyard::gin;
  namespace c = railyard::collectives;
  namespace s = railyard::storage::snapshot;
  namespace e = railyard::expert;
  namespace t = railyard::fabric::tcp;
  namespace vw = railyard::fabric::verbs;
  bool ok = true;

  {  // nccl_records
    n::FabricHandle fh;
    fh.listenId = 0x1234;
    fh.pid = 42;
    fh.host = "spark-a";
    fh.address = TcpAddress(40000);
    Bytes h(128);
    ok &= n::EncodeFabricHandle(fh, h.data()).ok();
    ok &= Write("nccl_records", "ok-handle", h);
    Bytes hv = h;
    hv[4] = 99;  // another protocol version
    ok &= Write("nccl_records", "bad-handle-version", hv);
    n::Hello hello;
    hello.listenId = 0x1234;
    hello.sendCommId = 3;
    hello.pid = 43;
    hello.host = "spark-b";
    hello.fifoKey = Key(0x10000, sizeof(n::FabricCts) * 32).Pack();
    hello.address = TcpAddress(40001);
    ok &= Write("nccl_records", "ok-hello", n::EncodeHello(hello));
    hello.fifoKey = Key(0x10000, 4096).Pack();
    ok &= Write("nccl_records", "bad-hello-small-fifo", n::EncodeHello(hello));
    n::FabricCts cts{};
    cts.header = p::MakeHeader(p::RecordKind::kFabricCts);
    cts.seq = 5;
    cts.n = 2;
    cts.recvCommId = 9;
    for (uint32_t i = 0; i < 2; ++i) {
      const Bytes k = Key(0x200000, 1 << 20, 2).Pack();
      cts.entries[i].addr = 0x200000 + i * 4096;
      cts.entries[i].size = 4096;
      cts.entries[i].tag = static_cast<int32_t>(i);
      cts.entries[i].keyBytes = static_cast<uint16_t>(k.size());
      std::memcpy(cts.entries[i].key, k.data(), k.size());
    }
    Bytes cb(reinterpret_cast<const uint8_t*>(&cts), reinterpret_cast<const uint8_t*>(&cts) + n::FabricCtsBytes(2));
    ok &= Write("nccl_records", "ok-cts-2", cb);
    cts.entries[1].size = 2 << 20;  // past its region
    Bytes cbad(reinterpret_cast<const uint8_t*>(&cts), reinterpret_cast<const uint8_t*>(&cts) + n::FabricCtsBytes(2));
    ok &= Write("nccl_records", "bad-cts-outside-region", cbad);
    ok &= Write("nccl_records", "ok-close", n::EncodeClose({7}));
  }

  {  // relay_wire
    r::Control credit;
    credit.kind = r::ControlKind::kCredit;
    credit.route = 2;
    credit.a = 10;
    ok &= Write("relay_wire", "ok-credit", r::EncodeControl(credit));
    r::RouteOpen o;
    o.slots = 16;
    o.slotBytes = 4096;
    o.returnSlots = 8;
    o.source = TcpAddress(40002);
    o.target = TcpAddress(40003);
    o.returnKey = Key(0x300000, 8 * 4096).Pack();
    o.nonce = 0xabcdef;
    r::Control open;
    open.kind = r::ControlKind::kOpen;
    open.route = 1;
    open.body = r::EncodeRouteOpen(o);
    ok &= Write("relay_wire", "ok-open", r::EncodeControl(open));
    // A ring of 8 slots in one slot's bytes: the control record is accepted, its open refused.
    o.returnKey = Key(0x300000, 4096).Pack();
    open.body = r::EncodeRouteOpen(o);
    ok &= Write("relay_wire", "control-ok-open-refused-small-return-ring", r::EncodeControl(open));
    // A slot of 257 + 16 * 32 bytes whose expected sequence is its own (shape bit 0).
    // A Write chunk names its Write's total (opBytes) and its offset (value): by default
    // the whole Write in one chunk.
    auto slot = [](r::SlotKind kind, uint32_t payload, bool key, uint64_t opBytes = ~0ull, uint64_t offset = 0,
                   uint16_t flags = r::kSlotLast) {
      Bytes b;
      Put<uint8_t>(b, 0x21);
      Put<uint64_t>(b, 0);
      Bytes sl(r::kSlotPayloadOffset + 1 + 16 * 32, 0);
      r::SlotHeader h;
      h.kind = static_cast<uint8_t>(kind);
      h.flags = flags;
      if (kind == r::SlotKind::kWrite) {
        h.opBytes = opBytes == ~0ull ? payload : opBytes;
        h.value = offset;
      }
      h.payloadBytes = payload;
      h.slotSeq = 12;
      h.opSeq = 3;
      h.addr = 0x400000;
      const Bytes k = key ? Key(0x400000, 1 << 20, 1).Pack() : Bytes{};
      (void)r::EncodeSlotHeader(h, k, sl.data());
      b.insert(b.end(), sl.begin(), sl.end());
      return b;
    };
    ok &= Write("relay_wire", "ok-slot-write", slot(r::SlotKind::kWrite, 500, true));
    ok &= Write("relay_wire", "ok-slot-record", slot(r::SlotKind::kRecord, 64, false));
    ok &= Write("relay_wire", "bad-slot-overrun", slot(r::SlotKind::kWrite, 600, true));
    ok &= Write("relay_wire", "bad-slot-read-with-payload", slot(r::SlotKind::kRead, 8, true));
    // Version 2 (issue 10): chunks of a Write of 1000 bytes, and totals that disagree.
    ok &= Write("relay_wire", "ok-slot-write-first-chunk", slot(r::SlotKind::kWrite, 500, true, 1000, 0, 0));
    ok &= Write("relay_wire", "ok-slot-write-last-chunk-imm",
                slot(r::SlotKind::kWrite, 500, true, 1000, 500, r::kSlotLast | r::kSlotHasImm));
    ok &= Write("relay_wire", "bad-slot-write-last-before-total", slot(r::SlotKind::kWrite, 500, true, 1000, 0));
    ok &= Write("relay_wire", "bad-slot-write-ends-without-last", slot(r::SlotKind::kWrite, 500, true, 1000, 500, 0));
    ok &= Write("relay_wire", "bad-slot-write-past-total", slot(r::SlotKind::kWrite, 500, true, 900, 500));
    ok &= Write("relay_wire", "bad-slot-write-imm-not-last",
                slot(r::SlotKind::kWrite, 500, true, 1000, 0, r::kSlotHasImm));
    ok &= Write("relay_wire", "bad-slot-write-empty-chunk", slot(r::SlotKind::kWrite, 0, true, 1000, 0, 0));
    ok &= Write("relay_wire", "bad-slot-record-imm", slot(r::SlotKind::kRecord, 64, false, 0, 0, r::kSlotLast | r::kSlotHasImm));
  }

  {  // gin_wire
    Bytes h(g::kHandleBytes);
    const Bytes a = TcpAddress(40004);
    ok &= g::PackHandle(a, h.data()).ok();
    ok &= Write("gin_wire", "ok-handle", h);
    h[g::kHandleBytes - 1] = 1;
    ok &= Write("gin_wire", "bad-handle-padding", h);
    g::Record hello;
    hello.kind = g::RecordKind::kHello;
    hello.rank = 1;
    hello.nranks = 4;
    hello.meshId = 0x99;
    ok &= Write("gin_wire", "ok-record-hello", hello.Pack());
    g::Record w = hello;
    w.kind = g::RecordKind::kWindow;
    w.seq = 1;
    w.bytes = 1 << 20;
    w.key = Key(0x500000, 1 << 20);
    ok &= Write("gin_wire", "ok-record-window", w.Pack());
    w.bytes = 1 << 21;  // the key covers half the window
    ok &= Write("gin_wire", "bad-record-window-key", w.Pack());
  }

  {  // coll_wire
    c::ConnectRecord cr;
    cr.rank = 1;
    cr.nranks = 4;
    cr.chunkBytes = 1 << 20;
    cr.slots = 4;
    cr.smallBytes = 64 << 10;
    cr.staging = Key(0x600000, 8 << 20, 2);
    ok &= Write("coll_wire", "ok-connect", cr.Pack());
    Bytes b = cr.Pack();
    b.pop_back();
    ok &= Write("coll_wire", "bad-connect-short-key", b);
    Bytes m = cr.Pack();
    m[0] = 'X';
    ok &= Write("coll_wire", "bad-connect-magic", m);
  }

  {  // snapshot_wire: handshake header, request, response
    s::Header sh;
    sh.mode = s::Mode::kPaging;
    sh.kind = "ssm";
    sh.arenaBytes = 64 << 20;
    sh.blobBytes = 1 << 20;
    sh.addressBytes = 28;
    sh.timeoutMs = 250;  // version 6: the client's control timeout, any value
    s::Request rq;
    rq.op = s::Op::kCommit;
    rq.key = 5;
    rq.checksum = 0x1234;
    s::Response rs;
    rs.result = s::Response::kOk;
    rs.offset = 4096;
    auto all = [](const s::Header& a, const s::Request& b, const s::Response& d) {
      Bytes out;
      const auto ha = a.Encode();
      out.insert(out.end(), ha.begin(), ha.end());
      const auto rb = b.Encode();
      out.insert(out.end(), rb.begin(), rb.end());
      const Bytes rd = d.Encode();
      out.insert(out.end(), rd.begin(), rd.begin() + s::Response::kBytes);
      return out;
    };
    ok &= Write("snapshot_wire", "ok-paging", all(sh, rq, rs));
    s::Header bad = sh;
    bad.arenaBytes = (64 << 20) + 1;  // not a multiple of the blob
    Bytes b = all(bad, rq, rs);
    b[64] = 9;  // unknown op
    b[96] = 7;  // unknown result
    ok &= Write("snapshot_wire", "bad-all-three", b);
    // Wire version 3: a faulting get's answers.
    s::Request get = rq;
    get.op = s::Op::kGet;
    get.checksum = 0;
    s::Response faulting = rs;
    faulting.result = s::Response::kFaulting;
    faulting.checksum = 0xabcd;
    ok &= Write("snapshot_wire", "ok-get-faulting", all(sh, get, faulting));
    s::Response ready;
    ready.result = s::Response::kReady;
    ready.offset = 4 << 20;
    ok &= Write("snapshot_wire", "ok-get-ready", all(sh, get, ready));
    // Wire version 4: a busy answer to a client that holds a slot or pin already.
    s::Response busy;
    busy.result = s::Response::kBusy;
    ok &= Write("snapshot_wire", "ok-get-busy", all(sh, get, busy));
    // Wire version 5: a get queued for a slot hears kQueued before its answer.
    s::Response queued;
    queued.result = s::Response::kQueued;
    ok &= Write("snapshot_wire", "ok-get-queued", all(sh, get, queued));
    ready.checksum = 1;  // a ready record carries no checksum
    Bytes badReady = all(sh, get, ready);
    badReady[64] = 9;  // and an unknown op, so no part decodes
    sh.arenaBytes = (64 << 20) + 1;
    const auto hb = sh.Encode();
    std::copy(hb.begin(), hb.end(), badReady.begin());
    ok &= Write("snapshot_wire", "bad-ready-with-checksum", badReady);
  }

  {  // expert_manifest
    e::Manifest m;
    m.modelId = "tiny-moe";
    m.scheme = "qwen-moe";
    m.expertsPerLayer = 2;
    m.alignment = 64;
    m.tensors.push_back({"gate_proj.weight", "BF16", {4, 8}, 0, 64});
    m.tensors.push_back({"down_proj.weight", "F32", {8, 2}, 64, 64});
    m.recordBytes = 128;
    m.recordStride = 128;
    m.layers.push_back({0, "layer-0000.bin", {0x0123456789abcdefull, 0x1111111111111111ull}});
    m.layers.push_back({1, "layer-0001.bin", {0x2222222222222222ull, 0x3333333333333333ull}});
    const std::string j = m.ToJson();
    ok &= Write("expert_manifest", "ok-two-layers", Bytes(j.begin(), j.end()));
    ok &= Write("expert_manifest", "bad-truncated", Bytes(j.begin(), j.begin() + static_cast<long>(j.size() / 2)));
    std::string v = j;
    v.replace(v.find("\"version\": 1"), 12, "\"version\": 2");
    ok &= Write("expert_manifest", "bad-version-2", Bytes(v.begin(), v.end()));
    std::string f = j;
    f.replace(f.find("layer-0001.bin"), 14, "../etc/passwd!");
    ok &= Write("expert_manifest", "bad-file-name", Bytes(f.begin(), f.end()));
  }

  {  // tcp_frame: direction byte, 64-byte header, packed worker address
    auto frame = [](uint8_t dir, const t::FrameHeader& h, const Bytes& addr) {
      Bytes b;
      Put<uint8_t>(b, dir);
      Put(b, h);
      b.insert(b.end(), addr.begin(), addr.end());
      return b;
    };
    t::FrameHeader w = t::MakeHeader(t::FrameType::kWrite);
    w.seq = 1;
    w.addr = 0x700000;
    w.opBytes = 8192;
    w.offset = 4096;
    w.payloadBytes = 4096;
    w.flags = t::kFlagImmediate;
    w.imm = 7;
    ok &= Write("tcp_frame", "ok-write-chunk", frame(0, w, TcpAddress(40005)));
    t::FrameHeader ack = t::MakeHeader(t::FrameType::kAck);
    ack.seq = 1;
    ok &= Write("tcp_frame", "ok-ack", frame(1, ack, TcpAddress(40006)));
    Bytes badAddr = TcpAddress(0);
    t::FrameHeader over = w;
    over.payloadBytes = 8192;  // past the op's end
    ok &= Write("tcp_frame", "bad-write-overrun-port-0", frame(0, over, badAddr));
    ok &= Write("tcp_frame", "bad-ack-to-target", frame(0, ack, Bytes{1, 2, 3}));
    // WriteFinal (issue 10): the immediate reports the whole Write (value), never less than the op.
    t::FrameHeader fin = w;
    fin.flags = t::kFlagImmediate | t::kFlagReportBytes;
    fin.value = 3u << 20;
    ok &= Write("tcp_frame", "ok-write-final", frame(0, fin, TcpAddress(40007)));
    fin.value = 4096;
    ok &= Write("tcp_frame", "bad-write-final-below-op-port-0", frame(0, fin, badAddr));
    fin.flags = t::kFlagReportBytes;
    fin.value = 3u << 20;
    ok &= Write("tcp_frame", "bad-write-report-without-imm-port-0", frame(0, fin, badAddr));
    // Wire version 2 (issue 10, small messages): lazily acked Writes and ack bounds.
    t::FrameHeader lazy = w;
    lazy.flags = t::kFlagImmediate | t::kFlagLazyAck;
    ok &= Write("tcp_frame", "ok-write-lazy-ack", frame(0, lazy, TcpAddress(40008)));
    t::FrameHeader bound = t::MakeHeader(t::FrameType::kAck);
    bound.flags = t::kFlagBoundOnly;
    bound.offset = 17;
    ok &= Write("tcp_frame", "ok-ack-bound-only", frame(1, bound, TcpAddress(40009)));
    t::FrameHeader covering = ack;
    covering.offset = 1;  // the ack of op 1 also covers the lazy Write 0
    ok &= Write("tcp_frame", "ok-ack-with-bound", frame(1, covering, TcpAddress(40010)));
    bound.seq = 3;
    ok &= Write("tcp_frame", "bad-ack-bound-only-naming-an-op-port-0", frame(1, bound, badAddr));
    t::FrameHeader lazyRecord = t::MakeHeader(t::FrameType::kRecord);
    lazyRecord.opBytes = lazyRecord.payloadBytes = 16;
    lazyRecord.flags = t::kFlagLazyAck;
    ok &= Write("tcp_frame", "bad-record-lazy-ack-port-0", frame(0, lazyRecord, badAddr));
    t::FrameHeader boundWrite = w;
    boundWrite.flags = t::kFlagBoundOnly;
    ok &= Write("tcp_frame", "bad-write-bound-only-port-0", frame(0, boundWrite, badAddr));
    t::FrameHeader old = w;
    old.version = 1;  // a peer from before lazy acks: refused as another version
    ok &= Write("tcp_frame", "bad-write-wire-version-1-port-0", frame(0, old, badAddr));
    old.version = 2;  // a peer from before relayed hellos: refused as another version
    ok &= Write("tcp_frame", "bad-write-wire-version-2-port-0", frame(0, old, badAddr));
    // Wire version 3 (D5): a hello spliced through relays says so; no other frame may.
    t::FrameHeader relayedHello = t::MakeHeader(t::FrameType::kHello);
    relayedHello.addr = 0x77;
    relayedHello.opBytes = 2;
    relayedHello.flags = t::kFlagRelayed;
    ok &= Write("tcp_frame", "ok-hello-relayed", frame(0, relayedHello, TcpAddress(40011)));
    t::FrameHeader relayedWrite = w;
    relayedWrite.flags = t::kFlagRelayed;
    ok &= Write("tcp_frame", "bad-write-relayed-port-0", frame(0, relayedWrite, badAddr));
  }

  {  // verbs_wire: address, then a hello
    vw::VerbsAddress a;
    a.workerId = 0x88;
    a.ipv4 = htonl(0x0a000001);
    a.port = 40007;
    a.rails = 2;
    vw::VerbsHello h;
    h.role = vw::VerbsHello::kRoleAccept;
    h.workerId = 0x89;
    h.connection = 1;
    h.recordCredits = 64;
    h.recordBytes = 4096;
    Bytes b = a.Pack();
    Put(b, h);
    ok &= Write("verbs_wire", "ok-address-accept-hello", b);
    // Then a write-size record (issue 10: the SEND WITH IMM ending a striped Write).
    Bytes sized = b;
    const Bytes rec = vw::WriteSizeRecord{3u << 20}.Pack();
    sized.insert(sized.end(), rec.begin(), rec.end());
    ok &= Write("verbs_wire", "ok-address-hello-size-record", sized);
    Bytes bad = a.Pack();
    bad[6] = 17;  // 17 rails
    vw::VerbsHello hb = h;
    hb.recordCredits = 2;
    Put(bad, hb);
    ok &= Write("verbs_wire", "bad-rails-credits", bad);
    Bytes badRec = vw::WriteSizeRecord{4096}.Pack();
    badRec[5] = 1;  // reserved bytes set
    bad.insert(bad.end(), badRec.begin(), badRec.end());
    ok &= Write("verbs_wire", "bad-rails-credits-size-record-reserved", bad);
  }
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR   (writes DIR/<target>/ok-*, bad-*)\n", argv[0]);
    return 2;
  }
  g_dir = argv[1];
  bool ok = true;

  ok &= Write("handle", "ok-ipv4", Handle(AF_INET, 4));
  ok &= Write("handle", "ok-ipv6", Handle(AF_INET6, 0));
  ok &= Write("handle", "bad-magic", Handle(AF_INET, 2, [](uint8_t* h) { h[0] = 'N'; }));
  ok &= Write("handle", "bad-version", Handle(AF_INET, 2, [](uint8_t* h) { h[4] = 2; }));
  ok &= Write("handle", "bad-rails", Handle(AF_INET, 2, [](uint8_t* h) { h[80] = 7; }));
  ok &= Write("handle", "bad-port0", Handle(AF_INET, 2, [](uint8_t* h) { h[18] = h[19] = 0; }));

  {
    // One receive of one 4096-byte buffer: the CTS the sender sees, the chunk in two halves,
    // then the reposted receive (seq 1) filled whole; a reject record at the end.
    Bytes b = Plan({{4096}});
    Put(b, Cts(0, {{4096, 0}}));
    Put(b, Chunk(0, 0, 0, 2048, 4096));
    Put(b, Chunk(0, 0, 2048, 2048, 4096));
    Put(b, Chunk(1, 0, 4096, 4096, 4096));
    p::RejectRecord r{};
    r.header = p::MakeHeader(p::RecordKind::kReject);
    std::snprintf(r.reason, sizeof r.reason, "listener refused: wrong listen id");
    Put(b, r);
    ok &= Write("records", "ok-cts-chunks-reject", b);
    Bytes g = Plan({{1024, 2048}, {512}});
    Put(g, Cts(0, {{1024, 3}, {2048, 5}}));
    Put(g, Cts(1, {{512, 3}}));
    Put(g, Chunk(1, 0, 3072, 512, 512));
    Put(g, Chunk(0, 1, 1024, 2048, 2048));
    Put(g, Chunk(0, 0, 0, 1024, 1024));
    ok &= Write("records", "ok-grouped", g);
    Bytes o = Plan({{4096}});
    Put(o, Chunk(0, 0, 4000, 200, 200));  // past the end of the posted buffer
    ok &= Write("records", "bad-outside", o);
    Bytes s = Plan({{4096}});
    Put(s, Cts(3, {{4096, 0}}));  // seq 3 first
    ok &= Write("records", "bad-cts-seq", s);
  }

  {
    // control: sends {tag, size}, then the receiver's control stream.
    auto sendsHead = [](uint8_t head, std::vector<std::pair<int32_t, uint16_t>> sends) {
      Bytes b{head};
      for (const auto& [tag, size] : sends) {
        Put<int32_t>(b, tag);
        Put<uint16_t>(b, size);
      }
      return b;
    };
    Bytes b = sendsHead(2, {{1, 4096}, {2, 100}, {1, 65535}});
    Put(b, Cts(0, {{4096, 1}, {8192, 2}}));
    Put(b, Cts(1, {{65536, 1}}));
    ok &= Write("control", "ok-two-receives", b);
    Bytes r = sendsHead(0x80, {{1, 10}});
    p::RejectRecord rej{};
    rej.header = p::MakeHeader(p::RecordKind::kReject);
    std::snprintf(rej.reason, sizeof rej.reason, "connection record is for another listener (stale handle?)");
    Put(r, rej);
    ok &= Write("control", "bad-reject", r);
    Bytes big = sendsHead(0, {{1, 5000}});
    Put(big, Cts(0, {{4096, 1}}));  // the send is larger than the posted buffer
    ok &= Write("control", "bad-too-large", big);
    Bytes k = sendsHead(0x80, {{1, 10}});
    Put(k, p::MakeHeader(p::RecordKind::kChunk));
    ok &= Write("control", "bad-kind", k);
  }

  {
    // chunk_stream: plan, budget byte, then operations {socket | close << 1, u16 length, bytes}.
    auto op = [](Bytes& b, uint8_t sel, const Bytes& bytes) {
      Put<uint8_t>(b, sel);
      Put<uint16_t>(b, static_cast<uint16_t>(bytes.size()));
      b.insert(b.end(), bytes.begin(), bytes.end());
    };
    auto chunk = [](const p::ChunkHeader& h, char fill, bool payload = true) {
      Bytes c;
      Put(c, h);
      if (payload) c.insert(c.end(), h.len, static_cast<uint8_t>(fill));
      return c;
    };
    Bytes b = Plan({{4096}, {1024}});
    Put<uint8_t>(b, 0);  // budget 64 bytes a call
    Bytes all = chunk(Chunk(0, 0, 0, 1000, 4096), 'a');
    for (const Bytes& c : {chunk(Chunk(0, 0, 1000, 3096, 4096), 'b'), chunk(Chunk(1, 0, 4096, 1024, 1024), 'c')}) {
      all.insert(all.end(), c.begin(), c.end());
    }
    op(b, 0, all);
    ok &= Write("chunk_stream", "ok-three-chunks", b);
    // One message striped over both sockets: socket 1's header first, its payload last.
    Bytes two = Plan({{4096}});
    Put<uint8_t>(two, 7);
    op(two, 1, chunk(Chunk(0, 0, 2048, 2048, 4096), 'y', false));
    op(two, 0, chunk(Chunk(0, 0, 0, 2048, 4096), 'x'));
    op(two, 1, Bytes(2048, 'y'));
    ok &= Write("chunk_stream", "ok-two-sockets", two);
    Bytes o = Plan({{4096}});
    Put<uint8_t>(o, 255);
    op(o, 0, chunk(Chunk(0, 0, 8192, 16, 16), 'x'));  // outside the posted buffer
    ok &= Write("chunk_stream", "bad-outside", o);
    Bytes k = Plan({{4096}});
    Put<uint8_t>(k, 3);
    p::ChunkHeader c = Chunk(0, 0, 0, 16, 16);
    c.header.kind = static_cast<uint16_t>(p::RecordKind::kCts);
    op(k, 2, chunk(c, 'z', false));
    ok &= Write("chunk_stream", "bad-kind", k);
  }

  {
    Bytes b{2, 2};  // a TCP listener with 2 data sockets; 3 sockets
    for (uint16_t i = 0; i < 3; ++i) {
      b.push_back(1);  // patch in the listen id
      const Bytes h = Hello(0x77, i, 2);
      b.insert(b.end(), h.begin(), h.end());
    }
    ok &= Write("listener", "ok-tcp-2-sockets", b);
    Bytes vb{0, 0, 1};  // a verbs listener (control socket only)
    const Bytes vh = Hello(0x78, 0, 0);
    vb.insert(vb.end(), vh.begin(), vh.end());
    ok &= Write("listener", "ok-verbs-control", vb);
    Bytes w{1, 0, 1};
    const Bytes wh = Hello(0x79, 0, 1, 2);
    w.insert(w.end(), wh.begin(), wh.end());
    ok &= Write("listener", "bad-version", w);
    Bytes s{1, 0, 0};  // the listen id left as 0: a stale handle
    const Bytes sh = Hello(0x7a, 0, 1);
    s.insert(s.end(), sh.begin(), sh.end());
    ok &= Write("listener", "bad-stale-id", s);
    Bytes t{1, 1, 3, 20};  // 2 sockets: a partial hello, then nothing
    const Bytes th = Hello(0x7b, 0, 1);
    t.insert(t.end(), th.begin(), th.end());
    ok &= Write("listener", "bad-partial", t);
  }

  {
    // A relay record, its MAC when `mac` (the flags say so), the header of the hello after it.
    auto relay = [](uint64_t dest, uint16_t port, uint8_t hops, uint16_t kind, bool mac = false) {
      p::RelayRecord r{};
      r.header = p::MakeHeader(static_cast<p::RecordKind>(kind));
      r.destHost = dest;
      r.originHost = 0x42;
      r.destPort = port;
      r.sockIndex = 3;
      r.hops = hops;
      std::snprintf(r.originName, sizeof r.originName, "spark-3");
      r.flags = mac ? p::kRelayFlagMac : 0;
      Bytes b;
      Put(b, r);
      if (mac) {
        railyard::topology::ClusterMac m{};
        if (!FuzzKey().Mac(p::kRelayMacPurpose, &r, sizeof r, &m)) std::abort();
        b.insert(b.end(), m.begin(), m.end());
      }
      Put(b, p::MakeHeader(p::RecordKind::kHello));
      return b;
    };
    ok &= Write("relay_record", "bad-this-host", relay(1, 5000, 0, 5));  // the policy: never to itself
    ok &= Write("relay_record", "bad-no-route", relay(0x1234, 5000, 2, 5));
    ok &= Write("relay_record", "bad-kind", relay(1, 5000, 0, 1));
    // Host 2 is in the target's graph: the policy passes, no rail reaches it.
    ok &= Write("relay_record", "bad-host-2-unreachable", relay(2, 5000, 0, 5));
    ok &= Write("relay_record", "bad-host-2-keyed-unreachable", relay(2, 5000, 0, 5, true));
    ok &= Write("relay_record", "bad-relay-port", relay(2, 29518, 0, 5));
  }

  ok &= Write("qp_record", "ok-2-rails-4-qps", QpSet(4, 2, 4));
  ok &= Write("qp_record", "ok-any-1-rail", QpSet(0, 1, 1));
  ok &= Write("qp_record", "bad-mtu", QpSet(0, 1, 2, 9));
  ok &= Write("qp_record", "bad-count", QpSet(3, 2, 4));
  {
    Bytes t = QpSet(0, 2, 4);
    t.resize(t.size() - 5);
    ok &= Write("qp_record", "bad-truncated", t);
  }

  const uint64_t kSelf = 0x5e1f5e1f5e1f5e1full, kB = 0xb, kC = 0xc, kD = 0xd;
  ok &= Write("cabling", "ok-hello", CablingHello(kB, "spark-b", "enp1s0f0np0", 0x0a000102));
  ok &= Write("cabling", "ok-hello-mac", CablingHello(kB, "spark-b", "enp1s0f0np0", 0x0a000102, true));
  ok &= Write("cabling", "ok-record-mac", CablingRecord(kB, 7, "spark-b", {{"eth0", "fz0", kSelf, 0x0a000102,
                                                                          0x0a000101}}, true));
  ok &= Write("cabling", "ok-record", CablingRecord(kB, 1700000000000000ull, "spark-b",
                                                    {{"enp1s0f0np0", "fz0", kSelf, 0x0a000102, 0x0a000101},
                                                     {"enp1s0f1np1", "eth0", kC, 0x0a000202, 0x0a000201}}));
  {
    Bytes t = CablingHello(kB, "spark-b", "eth0", 0x0a000102);
    t.pop_back();
    ok &= Write("cabling", "bad-short-hello", t);
    Bytes m = CablingRecord(kB, 1, "spark-b", {});
    m[0] = 'X';
    ok &= Write("cabling", "bad-magic", m);
    Bytes v1 = CablingRecord(kB, 1, "spark-b", {});
    v1[4] = 1;  // version 1: no speaker, no MAC
    ok &= Write("cabling", "bad-version-1", v1);
    Bytes cut = CablingHello(kB, "spark-b", "eth0", 0x0a000102, true);
    cut.resize(cut.size() - 1);  // says a MAC follows, one byte of it missing
    ok &= Write("cabling", "bad-short-mac", cut);
  }

  {
    // A ring of 4: this host (self) cabled to B (its rail fz0) and D (fz1); C opposite.
    Bytes b;
    const std::string self = "spark-a";
    Put<uint8_t>(b, static_cast<uint8_t>(self.size()));
    b.insert(b.end(), self.begin(), self.end());
    Framed(b, CablingHello(kB, "spark-b", "eth0", 0x0a000102));
    Framed(b, CablingHello(kD, "spark-d", "eth1", 0x0a000402));
    Framed(b, CablingRecord(kB, 10, "spark-b", {{"eth0", "fz0", kSelf, 0x0a000102, 0x0a000101},
                                               {"eth1", "eth0", kC, 0x0a000201, 0x0a000202}}));
    Framed(b, CablingRecord(kC, 10, "spark-c", {{"eth0", "eth1", kB, 0x0a000202, 0x0a000201},
                                               {"eth1", "eth0", kD, 0x0a000301, 0x0a000302}}));
    Framed(b, CablingRecord(kD, 10, "spark-d", {{"eth0", "eth1", kC, 0x0a000302, 0x0a000301},
                                               {"eth1", "fz1", kSelf, 0x0a000402, 0x0a000401}}));
    ok &= Write("graph_json", "ok-ring-of-4", b);
    // Two hosts on two cables; a stale record of B (lower seq) after the fresh one.
    Bytes t;
    Put<uint8_t>(t, 4);
    for (char ch : std::string("duo1")) t.push_back(static_cast<uint8_t>(ch));
    Framed(t, CablingHello(kB, "duo2", "p1", 0x0a000102));
    Framed(t, CablingHello(kB, "duo2", "p2", 0x0a000202));
    Framed(t, CablingRecord(kB, 20, "duo2", {{"p1", "fz0", kSelf, 0x0a000102, 0x0a000101},
                                            {"p2", "fz1", kSelf, 0x0a000202, 0x0a000201}}));
    Framed(t, CablingRecord(kB, 19, "duo2-old", {}));
    ok &= Write("graph_json", "ok-two-cables", t);
  }
  ok &= FabricSeeds();
  ok &= CableAddressSeeds();
  ok &= RelayReplySeeds();
  return ok ? 0 : 1;
}
