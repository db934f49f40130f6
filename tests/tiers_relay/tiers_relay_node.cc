// One host's part of the storage tiers' relayed lanes (tiers_relay_lane.py drives it
// on the netns ring of 4): a tier peer on h2 and its clients on h0, which has no
// cable to h2, so every control record and every byte of data goes through the
// fabric relay (the Forwarder railyardd runs on h1 or h3).
//
// Each process starts its own cabling agent (proxy::Router) for the graph, a
// fabric-mode Domain over it (runtime::CableSetDomain: straight on a cable, relayed
// otherwise), and the control tunnel (storage/tunnel/control_tunnel.h) that carries
// the tier's TCP control protocol as records over the same route.
//
// Roles (the peer file holds the hex Worker address of the peer's tunnel acceptor):
//   make-store     --store DIR [--layers L --experts E --record-bytes B] (then exits;
//                  for railyardd --expert-store in the C API lanes)
//   expert-serve   --store DIR --out FILE [--layers L --experts E --record-bytes B]
//                  (writes a pattern store into DIR first when DIR does not exist)
//   snapshot-serve --arena SPEC --swap-dir DIR --out FILE
//   expert-fetch   --peer FILE --store DIR [--stream --max-seconds S]
//   expert-bench   --peer FILE --direct FILE --store DIR --rounds R
//   snapshot-put   --peer FILE --kind K --blob BYTES --count N [--stream --max-seconds S]
// Common: --neighbours K (cabled neighbours to wait for; default 2), --links N (rail-links
// of the whole cluster to wait for; default 0).
// Exit 0: done and checked; 3: the named error of a fault ("error-at-ms", "error");
// 1: a check failed (bytes differ: "TORN"); 2: set-up failed.
#include <arpa/inet.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/relay/graph_routes.h"
#include "proxy/fabric/relay/relay_options.h"
#include "proxy/fabric/relay/seat_forwarder.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/routing/router.h"
#include "proxy/runtime/cable_set_domain.h"
#include "storage/expert/expert_client.h"
#include "storage/expert/expert_server.h"
#include "storage/expert/store.h"
#include "storage/expert/store_writer.h"
#include "storage/snapshot/snapshot_client.h"
#include "storage/snapshot/snapshot_server.h"
#include "storage/tunnel/control_tunnel.h"

namespace ry = railyard;
using ry::Status;

namespace {

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }

std::map<std::string, std::string> g_flags;
std::string Flag(const std::string& k, const std::string& def = "") {
  auto it = g_flags.find(k);
  return it == g_flags.end() ? def : it->second;
}
bool Has(const std::string& k) { return g_flags.count(k) > 0; }

[[noreturn]] void Die(const std::string& what) {
  std::printf("setup-failed %s\n", what.c_str());
  std::fflush(stdout);
  std::_Exit(2);
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string Hex(const std::vector<uint8_t>& b) {
  static const char* d = "0123456789abcdef";
  std::string s;
  for (uint8_t x : b) {
    s += d[x >> 4];
    s += d[x & 15];
  }
  return s;
}

std::vector<uint8_t> ReadHexFile(const std::string& path) {
  for (int i = 0; i < 600 && !std::filesystem::exists(path); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // polling for the peer's file
  }
  std::ifstream f(path);
  std::string h;
  f >> h;
  if (h.empty() || h.size() % 2 != 0) Die("no address in " + path);
  std::vector<uint8_t> b;
  for (size_t i = 0; i < h.size(); i += 2) b.push_back(static_cast<uint8_t>(std::stoi(h.substr(i, 2), nullptr, 16)));
  return b;
}

void WriteFileAtomically(const std::string& path, const std::string& text) {
  {
    std::ofstream f(path + ".tmp");
    f << text << "\n";
  }
  std::filesystem::rename(path + ".tmp", path);
}

/// This process's graph and fabric-mode Domain.
struct Fabric {
  const ry::env::Config* cfg = nullptr;
  std::unique_ptr<ry::proxy::Router> router;
  std::unique_ptr<ry::runtime::CableSetDomain> domain;
  std::unique_ptr<ry::fabric::RegistrationCache> cache;
  std::unique_ptr<ry::fabric::Worker> worker;

  void Start() {
    if (Status s = ry::env::Load(&cfg); !s.ok()) Die(s.message());
    std::vector<ry::proxy::FabricRail> rails;
    if (Status s = ry::proxy::SelectFabricRails(cfg->railIfname, cfg->defaultSpeedMbps, &rails); !s.ok() || rails.empty()) {
      Die("no rails");
    }
    ry::proxy::RouterOptions ro;
    ro.hostName = cfg->hostName.empty() ? "node" : cfg->hostName;
    ro.agent.port = static_cast<uint16_t>(cfg->discoveryPort);
    ro.agent.intervalMs = cfg->discoveryIntervalMs;
    ro.agent.deadIntervalMs = cfg->discoveryDeadMs;
    if (Status s = ry::proxy::Router::Start(rails, ro, &router); !s.ok()) Die(s.message());
    const size_t want = static_cast<size_t>(std::stoi(Flag("neighbours", "2")));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    // And the whole ring (--links: rail-links of the cluster), so that the route this
    // process reports is the one its Endpoints take (a tie between relays is broken
    // the same way once every cable is known).
    const size_t links = static_cast<size_t>(std::stoi(Flag("links", "0")));
    while (router->Agent().Graph().Neighbours(router->HostId()).size() < want ||
           router->Agent().Graph().Links().size() < links) {
      if (std::chrono::steady_clock::now() > deadline) Die("the cabling graph never showed the neighbours");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the cabling graph
    }
    ry::runtime::CableSetOptions o;
    o.self = router->HostId();
    o.graph = ry::fabric::relay::RouterGraph(*router);
    o.tcp = ry::fabric::tcp::TcpOptions::FromConfig(*cfg, {});
    o.relay = ry::fabric::relay::RelayOptions::FromConfig(*cfg);
    o.forwarderPort = static_cast<uint16_t>(cfg->fabricRelayPort);
    for (const auto& r : rails) {
      char ip[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &r.addr, ip, sizeof ip);
      o.rails.push_back({r.ifname, ip, static_cast<uint32_t>(r.speedMbps)});
    }
    if (Status s = ry::runtime::CableSetDomain::Create(std::move(o), &domain); !s.ok()) Die(s.message());
    cache = std::make_unique<ry::fabric::RegistrationCache>(*domain);
    if (Status s = domain->CreateWorker(&worker); !s.ok()) Die(s.message());
  }

  /// Waits until the graph routes to the owner of `peer` (a HostAddress) and says how.
  std::string Route(const std::vector<uint8_t>& peer) {
    ry::runtime::HostAddress to;
    if (Status s = ry::runtime::HostAddress::Unpack(peer, &to); !s.ok()) Die(s.message());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      const ry::topology::ClusterGraph g = router->Agent().Graph();
      std::vector<uint8_t> cable;
      ry::fabric::relay::SourcePlan plan;
      if (ry::runtime::PickCable(g, router->HostId(), to, &cable).ok() &&
          ry::fabric::relay::PlanSource(g, router->HostId(), cable, static_cast<uint16_t>(cfg->fabricRelayPort), &plan).ok()) {
        return (plan.relay.empty() ? "direct to " : "via relay ") + g.HostName(plan.neighbour);
      }
      if (std::chrono::steady_clock::now() > deadline) Die("no route to the peer in the cabling graph");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling the cabling graph
    }
  }
};

void WaitForSignal() {
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

uint8_t PatternByte(size_t layer, uint64_t expert, uint64_t i) {
  uint64_t x = (layer + 1) * 0x9e3779b97f4a7c15ull ^ (expert + 1) * 0xbf58476d1ce4e5b9ull ^ (i / 8) * 0x94d049bb133111ebull;
  x ^= x >> 31;
  return static_cast<uint8_t>(x >> (8 * (i % 8)));
}

void MakeStore(const std::string& dir) {
  if (std::filesystem::exists(dir)) return;
  ry::expert::Manifest m;
  m.modelId = "test/relayed-moe";
  m.scheme = "qwen-moe";
  m.expertsPerLayer = std::stoull(Flag("experts", "8"));
  m.alignment = 256;
  const uint64_t bytes = std::stoull(Flag("record-bytes", "1048576")) / 2 / 256 * 256;
  m.tensors = {{"gate_proj.weight", "BF16", {bytes / 2}, 0, bytes}, {"down_proj.weight", "BF16", {bytes / 2}, bytes, bytes}};
  m.recordBytes = 2 * bytes;
  m.recordStride = m.recordBytes;
  for (size_t l = 0; l < std::stoull(Flag("layers", "2")); ++l) m.layers.push_back({2 * l + 1, "", {}});
  Status s = ry::expert::WriteStore(dir, m, [&m](size_t l, uint64_t e, char* dst) {
    for (uint64_t i = 0; i < m.recordBytes; ++i) dst[i] = static_cast<char>(PatternByte(l, e, i));
    return Status::Ok();
  });
  if (!s.ok()) Die(s.message());
}

int ExpertServe() {
  Fabric f;
  f.Start();
  MakeStore(Flag("store"));
  std::unique_ptr<ry::expert::Store> store;
  if (Status s = ry::expert::Store::Open(Flag("store"), false, &store); !s.ok()) Die(s.message());
  ry::expert::ServerOptions so;
  so.listenAddress = "127.0.0.1";  // reached only through the tunnel
  so.timeoutMs = f.cfg->timeoutMs;
  std::unique_ptr<ry::expert::ExpertServer> server;
  if (Status s = ry::expert::ExpertServer::Start(std::move(store), f.domain.get(), f.worker.get(), so, &server); !s.ok()) {
    Die(s.message());
  }
  std::unique_ptr<ry::storage::tunnel::ControlTunnel> tunnel;
  if (Status s = ry::storage::tunnel::ControlTunnel::Accept(*f.domain, "127.0.0.1", server->port(), {}, &tunnel); !s.ok()) {
    Die(s.message());
  }
  WriteFileAtomically(Flag("out"), Hex(tunnel->WorkerAddress()));
  std::printf("serving expert store %s\n", Flag("store").c_str());
  std::fflush(stdout);
  WaitForSignal();
  const auto ts = tunnel->stats();
  std::printf("tunnel opened %llu closed %llu failed %llu strays %llu malformed %llu\n",
              static_cast<unsigned long long>(ts.opened), static_cast<unsigned long long>(ts.closed),
              static_cast<unsigned long long>(ts.failed), static_cast<unsigned long long>(ts.strays),
              static_cast<unsigned long long>(ts.malformed));
  tunnel.reset();
  server->Stop();
  return 0;
}

/// An expert client on the fabric Domain through a tunnel to the peer in `peerFile`.
struct ExpertSide {
  std::unique_ptr<ry::storage::tunnel::ControlTunnel> tunnel;
  std::unique_ptr<ry::expert::ExpertClient> client;
  std::vector<char> arena;
  std::string route;
};

void OpenExpert(Fabric& f, const std::string& peerFile, ExpertSide* side) {
  const std::vector<uint8_t> peer = ReadHexFile(peerFile);
  side->route = f.Route(peer);
  if (Status s = ry::storage::tunnel::ControlTunnel::Dial(*f.domain, peer, {}, &side->tunnel); !s.ok()) Die(s.message());
  ry::expert::ClientOptions co;
  co.timeoutMs = f.cfg->timeoutMs;
  co.verifyChecksums = true;
  side->arena.assign(16 << 20, 0);
  // Set-up is retried (3 tries, 300 ms apart): a relay's ForwarderHost rebuilds its
  // ports when the cabling graph changes (a link flapping under load), and a route
  // opened in that window is refused (CONNECT_FAILED). Faults under test come later.
  for (int attempt = 1;; ++attempt) {
    Status s = ry::expert::ExpertClient::Open(side->tunnel->LocalAddress(), co, *f.cache, f.worker.get(),
                                              side->arena.data(), side->arena.size(), &side->client);
    if (s.ok()) break;
    if (attempt == 3) Die("open: " + s.message());
    std::printf("retry open: %s\n", s.message().c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a retry's pause, not a barrier
  }
}

/// Fetches every record of the store (as many as fit the arena at once) and checks
/// each against the layer file's bytes. Bytes fetched, or the error.
Status FetchAll(ExpertSide& side, const ry::expert::Store& store, uint64_t* bytes, bool* torn) {
  const ry::expert::Manifest& m = side.client->manifest();
  const uint64_t perBatch = std::max<uint64_t>(1, side.arena.size() / m.recordStride);
  std::vector<ry::expert::RecordRequest> batch;
  std::vector<char> want(m.recordStride);
  *bytes = 0;
  for (uint32_t l = 0; l < m.layers.size(); ++l) {
    for (uint64_t e = 0; e < m.expertsPerLayer; e += perBatch) {
      batch.clear();
      for (uint64_t k = 0; k < perBatch && e + k < m.expertsPerLayer; ++k) batch.push_back({l, e + k, k * m.recordStride});
      RY_RETURN_IF_ERROR(side.client->FetchBatch(batch));
      for (const auto& r : batch) {
        if (!store.ReadRecord(r.layer, r.expert, want.data()).ok() ||
            std::memcmp(want.data(), side.arena.data() + r.arenaOffset, m.recordStride) != 0) {
          *torn = true;
          return Status::Ok();
        }
        *bytes += m.recordStride;
      }
    }
  }
  return Status::Ok();
}

int ReportFault(const Status& s, const std::function<Status()>& again) {
  std::printf("error-at-ms %lld\nerror %s\n", static_cast<long long>(NowMs()), s.message().c_str());
  std::printf("stays-failed %s\n", again().ok() ? "no" : "yes");
  std::fflush(stdout);
  return 3;
}

int ExpertFetch() {
  Fabric f;
  f.Start();
  std::unique_ptr<ry::expert::Store> store;
  if (Status s = ry::expert::Store::Open(Flag("store"), false, &store); !s.ok()) Die(s.message());
  ExpertSide side;
  OpenExpert(f, Flag("peer"), &side);
  std::printf("route %s\n", side.route.c_str());
  const auto start = std::chrono::steady_clock::now();
  const double maxSeconds = std::stod(Flag("max-seconds", "60"));
  uint64_t total = 0;
  for (int round = 0;; ++round) {
    uint64_t bytes = 0;
    bool torn = false;
    const auto t0 = std::chrono::steady_clock::now();
    Status s = FetchAll(side, *store, &bytes, &torn);
    if (torn) {
      std::printf("TORN: a fetch returned Ok with bytes that differ from the store\n");
      return 1;
    }
    if (!s.ok()) return ReportFault(s, [&] { return side.client->Fetch(0, 0, 0); });
    total += bytes;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("fetched %llu bytes checked by content in %.3f s (%.0f B/s)\n", static_cast<unsigned long long>(bytes),
                secs, bytes / secs);
    if (!Has("stream")) break;
    if (round == 0) std::printf("streaming\n");
    std::fflush(stdout);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > maxSeconds) break;
  }
  if (Status s = side.client->Close(); !s.ok()) Die("close: " + s.message());
  std::printf("expert ok %llu bytes %s\n", static_cast<unsigned long long>(total), side.route.c_str());
  return 0;
}

int ExpertBench() {
  Fabric f;
  f.Start();
  std::unique_ptr<ry::expert::Store> store;
  if (Status s = ry::expert::Store::Open(Flag("store"), false, &store); !s.ok()) Die(s.message());
  ExpertSide relayed, direct;
  OpenExpert(f, Flag("peer"), &relayed);
  OpenExpert(f, Flag("direct"), &direct);
  std::printf("relayed route %s; direct route %s\n", relayed.route.c_str(), direct.route.c_str());
  std::vector<double> r, d;
  for (int round = 0; round < std::stoi(Flag("rounds", "5")); ++round) {
    for (ExpertSide* side : {&relayed, &direct}) {
      uint64_t bytes = 0;
      bool torn = false;
      const auto t0 = std::chrono::steady_clock::now();
      Status s = FetchAll(*side, *store, &bytes, &torn);
      if (!s.ok() || torn) Die("bench fetch: " + (torn ? std::string("TORN") : s.message()));
      const double bps = bytes / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      (side == &relayed ? r : d).push_back(bps);
      std::printf("round %d %s %.0f B/s\n", round, side == &relayed ? "relayed" : "direct", bps);
    }
  }
  std::sort(r.begin(), r.end());
  std::sort(d.begin(), d.end());
  const double mr = r[r.size() / 2], md = d[d.size() / 2];
  std::printf("bench relayed-median %.0f direct-median %.0f ratio %.2f bytes-per-round %llu\n", mr, md, mr / md,
              static_cast<unsigned long long>(store->TotalBytes()));
  (void)relayed.client->Close();
  (void)direct.client->Close();
  return 0;
}

int SnapshotServe() {
  Fabric f;
  f.Start();
  ry::storage::snapshot::ServerOptions so;
  ry::storage::snapshot::ArenaSpec spec;
  if (Status s = ry::storage::snapshot::ParseArenaSpec(Flag("arena"), &spec); !s.ok()) Die(s.message());
  so.arenas.push_back(spec);
  so.address = "127.0.0.1";  // reached only through the tunnel
  so.swapDir = Flag("swap-dir");
  so.timeoutMs = f.cfg->timeoutMs;
  std::unique_ptr<ry::storage::snapshot::SnapshotServer> server;
  if (Status s = ry::storage::snapshot::SnapshotServer::Start(*f.cache, *f.worker, so, &server); !s.ok()) Die(s.message());
  std::unique_ptr<ry::storage::tunnel::ControlTunnel> tunnel;
  if (Status s = ry::storage::tunnel::ControlTunnel::Accept(*f.domain, "127.0.0.1", server->port(), {}, &tunnel); !s.ok()) {
    Die(s.message());
  }
  WriteFileAtomically(Flag("out"), Hex(tunnel->WorkerAddress()));
  std::printf("serving snapshot arena %s\n", spec.kind.c_str());
  std::fflush(stdout);
  WaitForSignal();
  tunnel.reset();
  server.reset();
  return 0;
}

void FillBlob(uint64_t key, int round, std::vector<uint8_t>* b) {
  for (size_t i = 0; i < b->size(); ++i) (*b)[i] = PatternByte(static_cast<size_t>(round), key, i);
}

int SnapshotPut() {
  Fabric f;
  f.Start();
  const std::vector<uint8_t> peer = ReadHexFile(Flag("peer"));
  const std::string route = f.Route(peer);
  std::printf("route %s\n", route.c_str());
  std::unique_ptr<ry::storage::tunnel::ControlTunnel> tunnel;
  if (Status s = ry::storage::tunnel::ControlTunnel::Dial(*f.domain, peer, {}, &tunnel); !s.ok()) Die(s.message());
  const std::string local = tunnel->LocalAddress();
  ry::storage::snapshot::ClientOptions co;
  co.host = "127.0.0.1";
  co.port = static_cast<uint16_t>(std::stoi(local.substr(local.find(':') + 1)));
  co.kind = Flag("kind");
  co.mode = ry::storage::snapshot::Mode::kPaging;
  co.blobBytes = std::stoull(Flag("blob"));
  co.arenaBytes = co.blobBytes * std::stoull(Flag("slots"));
  co.timeoutMs = f.cfg->timeoutMs;
  std::unique_ptr<ry::storage::snapshot::SnapshotClient> client;
  for (int attempt = 1;; ++attempt) {  // retried as OpenExpert's set-up, for the same reason
    Status s = ry::storage::snapshot::SnapshotClient::Connect(*f.cache, *f.worker, co, &client);
    if (s.ok()) break;
    if (attempt == 3) Die("connect: " + s.message());
    std::printf("retry connect: %s\n", s.message().c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // a retry's pause, not a barrier
  }
  const uint64_t count = std::stoull(Flag("count", "16"));
  std::vector<uint8_t> blob(co.blobBytes), back(co.blobBytes);
  const auto start = std::chrono::steady_clock::now();
  const double maxSeconds = std::stod(Flag("max-seconds", "60"));
  uint64_t moved = 0;
  for (int round = 0;; ++round) {
    for (uint64_t k = 0; k < count; ++k) {
      FillBlob(k, round, &blob);
      if (Status s = client->Put(k, blob.data(), blob.size()); !s.ok()) {
        return ReportFault(s, [&] { return client->Put(k, blob.data(), blob.size()); });
      }
      moved += blob.size();
    }
    for (uint64_t k = 0; k < count; ++k) {
      FillBlob(k, round, &blob);
      bool found = false;
      if (Status s = client->Get(k, back.data(), back.size(), &found); !s.ok()) {
        return ReportFault(s, [&] { return client->Get(k, back.data(), back.size(), &found); });
      }
      if (!found || back != blob) {
        std::printf("TORN: blob %llu of round %d came back %s\n", static_cast<unsigned long long>(k), round,
                    found ? "with other bytes" : "absent");
        return 1;
      }
      moved += back.size();
    }
    std::printf("round %d: %llu blobs put and got back, checked by content\n", round, static_cast<unsigned long long>(count));
    if (!Has("stream")) break;
    if (round == 0) std::printf("streaming\n");
    std::fflush(stdout);
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > maxSeconds) break;
  }
  std::printf("snapshot ok %llu bytes %s\n", static_cast<unsigned long long>(moved), route.c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) Die("usage: tiers_relay_node ROLE [--flag value | --switch]...");
  const std::string role = argv[1];
  for (int i = 2; i < argc; ++i) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0) Die("unexpected argument " + k);
    k = k.substr(2);
    if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      g_flags[k] = argv[++i];
    } else {
      g_flags[k] = "1";
    }
  }
  if (role == "make-store") {
    MakeStore(Flag("store"));
    return 0;
  }
  if (role == "expert-serve") return ExpertServe();
  if (role == "expert-fetch") return ExpertFetch();
  if (role == "expert-bench") return ExpertBench();
  if (role == "snapshot-serve") return SnapshotServe();
  if (role == "snapshot-put") return SnapshotPut();
  Die("unknown role " + role);
}
