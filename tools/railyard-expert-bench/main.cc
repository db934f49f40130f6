// railyard-expert-bench: records/s and GB/s of expert fetches, for docs/benchmarks.md.
// For each record size it writes a one-layer store (in --dir, /dev/shm by default),
// starts an ExpertServer and a client in this process, each with its own fabric
// Domain (--fabric tcp: the TCP fabric on 127.0.0.1; --fabric verbs: the verbs fabric,
// the peer on --peer-hca's ports and the client on --client-hca's, by default the
// soft-RoCE lane's RXE_LANE_DEVS_H0 / _H1), and times, per batch size:
//   pread  local pread of the same records from the store's file (the floor a
//          peer-less reader pays, page cache warm)
//   tcp    ExpertClient over the TCP transport (request + record on the control socket)
//   read   ExpertClient over fabric Reads (RDMA READ on verbs; the TCP fabric's
//          emulation otherwise)
// Checksums are verified as by default (--no-verify to switch off). Batches whose
// bytes exceed --max-batch-bytes are left out (slow lanes).
//
// Output: one JSON object per line: {"fabric", "mode", "record_bytes", "batch", "records",
// "seconds", "records_per_s", "gbps"} (gbps = record bytes moved / s / 1e9).
#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/registration_cache.h"
#include "env/config.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/verbs/verbs_domain.h"
#include "storage/expert/expert_client.h"
#include "storage/expert/expert_server.h"
#include "storage/expert/expert_wire.h"
#include "storage/expert/store_writer.h"

namespace {

using namespace railyard;
using Clock = std::chrono::steady_clock;

/// The fabric Domain of one side: TCP on 127.0.0.1, or verbs on the ports `hca`
/// (RAILYARD_HCA syntax; empty: every usable port) with the bootstrap on 127.0.0.1.
Status Domain(const std::string& fabric, const std::string& hca, std::unique_ptr<fabric::Domain>* out) {
  if (fabric == "tcp") {
    fabric::tcp::TcpOptions o;
    o.rails = {{"lo", "127.0.0.1", 10000}};
    return fabric::tcp::CreateTcpDomain(o, out);
  }
  env::Config config;
  RY_RETURN_IF_ERROR(env::Parse(
      [&](const char* name) -> std::optional<std::string> {
        if (std::string(name) == "RAILYARD_HCA" && !hca.empty()) return hca;
        return std::nullopt;
      },
      {}, &config));
  fabric::verbs::VerbsOptions o = fabric::verbs::VerbsOptions::FromConfig(config);
  o.bootstrapAddress = "127.0.0.1";
  o.connectTimeoutMs = 60000;
  return fabric::verbs::CreateVerbsDomain(o, out);
}

/// "=dev1,dev2" from the space-separated device list in environment variable `var`.
std::string LaneHca(const char* var) {
  const char* devs = std::getenv(var);
  if (devs == nullptr) return "";
  std::string hca = "=";
  for (const char* p = devs; *p != 0; ++p) hca += *p == ' ' ? ',' : *p;
  return hca;
}

void Emit(const std::string& fabric, const char* mode, uint64_t bytes, size_t batch, uint64_t records, double secs) {
  std::printf("{\"fabric\": \"%s\", \"mode\": \"%s\", \"record_bytes\": %llu, \"batch\": %zu, \"records\": %llu, \"seconds\": %.4f, "
              "\"records_per_s\": %.1f, \"gbps\": %.3f}\n",
              fabric.c_str(), mode, static_cast<unsigned long long>(bytes), batch, static_cast<unsigned long long>(records), secs,
              records / secs, records * static_cast<double>(bytes) / secs / 1e9);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"railyard-expert-bench: expert fetch throughput on loopback"};
  std::vector<uint64_t> sizes{64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20};
  std::vector<size_t> batches{1, 8, 32};
  std::vector<std::string> modes{"pread", "tcp", "read"};
  std::string dir = "/dev/shm";
  double seconds = 1.0;
  uint64_t storeBytes = 256ull << 20;
  bool noVerify = false;
  std::string fabricName = "tcp", peerHca = LaneHca("RXE_LANE_DEVS_H0"), clientHca = LaneHca("RXE_LANE_DEVS_H1");
  uint64_t maxBatchBytes = 0;
  app.add_option("--fabric", fabricName, "tcp or verbs")->check(CLI::IsMember({"tcp", "verbs"}));
  app.add_option("--peer-hca", peerHca, "verbs: the peer's ports (RAILYARD_HCA syntax; default the lane's host 0)");
  app.add_option("--client-hca", clientHca, "verbs: the client's ports (default the lane's host 1)");
  app.add_option("--max-batch-bytes", maxBatchBytes, "leave out batches of more bytes than this (0: none)");
  app.add_option("--sizes", sizes, "record sizes (bytes)");
  app.add_option("--batches", batches, "batch sizes (records per FetchBatch)");
  app.add_option("--modes", modes, "pread, tcp, read");
  app.add_option("--dir", dir, "where the temporary stores go");
  app.add_option("--seconds", seconds, "time per point (at least one batch)");
  app.add_option("--store-bytes", storeBytes, "bytes per store (records cycle through it)");
  app.add_flag("--no-verify", noVerify, "skip the per-record checksum");
  CLI11_PARSE(app, argc, argv);

  for (uint64_t size : sizes) {
    expert::Manifest m;
    m.modelId = "bench";
    m.alignment = 4096;
    m.expertsPerLayer = std::max<uint64_t>(2, storeBytes / size);
    m.tensors = {{"w", "U8", {size}, 0, size}};
    m.recordBytes = size;
    m.recordStride = (size + 4095) / 4096 * 4096;
    m.layers = {{0, "", {}}};
    const std::string store = dir + "/railyard-expert-bench-" + std::to_string(::getpid()) + "-" + std::to_string(size);
    std::vector<uint64_t> seed(1);
    Status s = expert::WriteStore(store, m, [&](size_t, uint64_t e, char* dst) {
      for (uint64_t i = 0; i + 8 <= size; i += 4096) std::memcpy(dst + i, &(seed[0] = e * 131 + i), 8);
      return Status::Ok();
    });
    if (!s.ok()) {
      std::fprintf(stderr, "railyard-expert-bench: %s\n", s.message().c_str());
      return 1;
    }
    std::unique_ptr<expert::Store> st;
    if (Status o = expert::Store::Open(store, false, &st); !o.ok()) {
      std::fprintf(stderr, "railyard-expert-bench: %s\n", o.message().c_str());
      return 1;
    }
    const uint64_t stride = m.recordStride, experts = m.expertsPerLayer;
    const int fd = st->LayerFd(0);
    std::unique_ptr<fabric::Domain> sd, cd;
    std::unique_ptr<fabric::Worker> sw, cw;
    if (Status o = Domain(fabricName, peerHca, &sd); !o.ok() || !(o = sd->CreateWorker(&sw)).ok()) {
      std::fprintf(stderr, "railyard-expert-bench: peer %s Domain: %s\n", fabricName.c_str(), o.message().c_str());
      return 1;
    }
    std::unique_ptr<expert::ExpertServer> server;
    expert::ServerOptions so;
    if (Status o = expert::ExpertServer::Start(std::move(st), sd.get(), sw.get(), so, &server); !o.ok()) {
      std::fprintf(stderr, "railyard-expert-bench: %s\n", o.message().c_str());
      return 1;
    }
    if (Status o = Domain(fabricName, clientHca, &cd); !o.ok() || !(o = cd->CreateWorker(&cw)).ok()) {
      std::fprintf(stderr, "railyard-expert-bench: client %s Domain: %s\n", fabricName.c_str(), o.message().c_str());
      return 1;
    }
    fabric::RegistrationCache cache(*cd);
    const size_t maxBatch = *std::max_element(batches.begin(), batches.end());
    std::vector<char> arena(maxBatch * stride);
    for (const std::string& mode : modes) {
      std::unique_ptr<expert::ExpertClient> client;
      if (mode != "pread") {
        expert::ClientOptions co;
        co.transport = mode == "tcp" ? expert::kTransportTcp : expert::kTransportRead;
        co.verifyChecksums = !noVerify;
        if (Status o = expert::ExpertClient::Open("127.0.0.1:" + std::to_string(server->port()), co, cache, cw.get(),
                                                  arena.data(), arena.size(), &client);
            !o.ok()) {
          std::fprintf(stderr, "railyard-expert-bench: %s\n", o.message().c_str());
          return 1;
        }
      }
      for (size_t batch : batches) {
        if (maxBatchBytes > 0 && batch * size > maxBatchBytes && batch != batches.front()) continue;
        std::vector<expert::RecordRequest> reqs(batch);
        uint64_t next = 0, records = 0;
        auto one = [&]() -> Status {
          for (size_t i = 0; i < batch; ++i) reqs[i] = {0, (next++) % experts, i * stride};
          if (mode == "pread") {
            for (const auto& r : reqs) {
              if (::pread(fd, arena.data() + r.arenaOffset, stride, static_cast<off_t>(r.expert * stride)) != static_cast<ssize_t>(stride)) {
                return SystemError("pread");
              }
              if (!noVerify) (void)expert::RecordChecksum(arena.data() + r.arenaOffset, stride);
            }
            return Status::Ok();
          }
          return client->FetchBatch(reqs);
        };
        (void)one();  // warm-up
        const auto t0 = Clock::now();
        double secs = 0;
        do {
          if (Status o = one(); !o.ok()) {
            std::fprintf(stderr, "railyard-expert-bench: %s\n", o.message().c_str());
            return 1;
          }
          records += batch;
          secs = std::chrono::duration<double>(Clock::now() - t0).count();
        } while (secs < seconds);
        Emit(fabricName, mode.c_str(), size, batch, records, secs);
      }
      if (client) (void)client->Close();
    }
    server->Stop();
    server.reset();
    std::filesystem::remove_all(store);
  }
  return 0;
}
