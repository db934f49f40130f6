// The railyard_expert_* C API (include/railyard/railyard.h): each handle holds a lease
// on the process's shared fabric Domain and RegistrationCache (plugin/expert_domain.h:
// NCCL's when the plugin runs the fabric comms, so an arena NCCL registered is a cache
// hit), its own Worker, and an ExpertClient (storage/expert). A peer named "host:NAME"
// (plugin/tier_route.h) is reached instead through the client fabric's tunnel to
// railyardd's tier tunnel on that host, straight or relayed.
#include <cstring>
#include <memory>
#include <string>

#include "env/config.h"
#include "plugin/expert_domain.h"
#include "plugin/tier_route.h"
#include "proxy/fabric/registration_cache.h"
#include "railyard/railyard.h"
#include "storage/expert/expert_client.h"
#include "storage/expert/expert_error.h"

struct railyard_expert {
  railyard::runtime::FabricLease lease;  ///< the shared Domain and cache
  std::unique_ptr<railyard::fabric::Worker> worker;
  std::unique_ptr<railyard::plugin::TierRoute> route;  ///< host:NAME peers: tunnel and Worker
  std::unique_ptr<railyard::expert::ExpertClient> client;
  std::string manifestJson;
  ~railyard_expert() {
    client.reset();  // releases the arena before the lease goes
    worker.reset();  // a Worker goes before its Domain
    route.reset();
    railyard::runtime::ReleaseProcessFabric(&lease);
  }
};

namespace {

using railyard::Status;
using railyard::expert::ExpertErrc;

thread_local std::string g_lastError;

int Report(const Status& s) {
  if (s.ok()) {
    g_lastError.clear();
    return 0;
  }
  g_lastError = s.message();
  return static_cast<int>(railyard::expert::ExpertErrcOf(s));
}

int BadArg(const std::string& what) {
  return Report(railyard::expert::ExpertError(ExpertErrc::kInvalidArgument, what));
}

}  // namespace

extern "C" {

RAILYARD_API int railyard_expert_open(const char* peer, int transport, int verify, void* arena, uint64_t arenaBytes,
                                      railyard_expert** out) {
  using namespace railyard;
  // NULL on every failure, argument errors included (C API trial: those left it as it
  // was), as railyard_snapshot_connect does.
  if (out != nullptr) *out = nullptr;
  if (peer == nullptr || out == nullptr || arena == nullptr || arenaBytes == 0) {
    return BadArg("railyard_expert_open: NULL peer, arena or out, or a 0-byte arena");
  }
  if (transport != RAILYARD_EXPERT_TRANSPORT_TCP && transport != RAILYARD_EXPERT_TRANSPORT_READ) {
    return BadArg("railyard_expert_open: transport is not RAILYARD_EXPERT_TRANSPORT_TCP (1) or _READ (2)");
  }
  *out = nullptr;
  const env::Config* cfg = nullptr;
  if (Status s = env::Load(&cfg); !s.ok()) return Report(expert::ExpertError(ExpertErrc::kInvalidArgument, s.message()));
  auto h = std::make_unique<railyard_expert>();
  bool byHost = false;
  std::string hostName;
  if (Status s = plugin::ParseTierHost(peer, &byHost, &hostName); !s.ok()) {
    return Report(expert::ExpertError(ExpertErrc::kInvalidArgument, s.message()));
  }
  if (byHost) {
    expert::ClientOptions o;
    o.transport = static_cast<uint8_t>(transport);
    o.verifyChecksums = verify != 0;
    o.timeoutMs = cfg->timeoutMs;
    plugin::TierClientFabric* f = nullptr;
    h->route = std::make_unique<plugin::TierRoute>();
    // The client's own fabric not starting is this host's configuration (no rails, a bad
    // variable: INVALID_ARGUMENT) or system; the peer not reached is PEER_LOST.
    if (Status s = plugin::TierClientFabric::Get(&f); !s.ok()) {
      const bool config = s.code() == Code::kInvalidUsage || s.code() == Code::kInvalidArgument;
      return Report(expert::ExpertError(config ? ExpertErrc::kInvalidArgument : ExpertErrc::kSystem,
                                        "railyard_expert_open " + std::string(peer) + ": " + s.message()));
    }
    Status s = f->Open(hostName, static_cast<uint16_t>(cfg->tierTunnelPort), h->route.get());
    if (!s.ok()) return Report(expert::ExpertError(ExpertErrc::kPeerLost, "railyard_expert_open " + std::string(peer) + ": " + s.message()));
    fabric::Worker* w = transport == RAILYARD_EXPERT_TRANSPORT_READ ? h->route->worker.get() : nullptr;
    o.peerName = h->route->PeerName(peer);  // not the tunnel's local 127.0.0.1:PORT
    if (Status s2 = expert::ExpertClient::Open(h->route->local(), o, f->cache(), w, arena, arenaBytes, &h->client); !s2.ok()) {
      return Report(h->route->WithTunnelFailure(s2, peer, "--expert-store"));  // the control connection only saw a close
    }
    h->manifestJson = h->client->manifest().ToJson();
    *out = h.release();
    return Report(Status::Ok());
  }
  if (Status s = plugin::AcquireExpertFabric(*cfg, peer, &h->lease); !s.ok()) {
    // This host's configuration (a RAILYARD_SOCKET_IFNAME naming no interface, no rails)
    // is INVALID_ARGUMENT, as for the host:NAME path above; the rest SYSTEM (new-user
    // trial: a bad interface name was SYSTEM here, INVALID_USAGE for the snapshot tier).
    const bool config = s.code() == Code::kInvalidUsage || s.code() == Code::kInvalidArgument;
    return Report(expert::ExpertError(config ? ExpertErrc::kInvalidArgument : ExpertErrc::kSystem, s.message()));
  }
  if (transport == RAILYARD_EXPERT_TRANSPORT_READ) {
    if (Status s = h->lease.domain->CreateWorker(&h->worker); !s.ok()) return Report(expert::ExpertError(ExpertErrc::kSystem, s.message()));
  }
  expert::ClientOptions o;
  o.transport = static_cast<uint8_t>(transport);
  o.verifyChecksums = verify != 0;
  o.timeoutMs = cfg->timeoutMs;
  if (Status s = expert::ExpertClient::Open(peer, o, *h->lease.cache, h->worker.get(), arena, arenaBytes, &h->client); !s.ok()) {
    return Report(s);
  }
  h->manifestJson = h->client->manifest().ToJson();
  *out = h.release();
  return Report(Status::Ok());
}

RAILYARD_API int railyard_expert_layout_get(const railyard_expert* h, railyard_expert_layout* out) {
  if (h == nullptr || out == nullptr) return BadArg("railyard_expert_layout_get: NULL handle or out");
  const auto& m = h->client->manifest();
  out->layers = m.layers.size();
  out->experts_per_layer = m.expertsPerLayer;
  out->record_stride = m.recordStride;
  out->record_bytes = m.recordBytes;
  return Report(Status::Ok());
}

RAILYARD_API int railyard_expert_manifest(const railyard_expert* h, char* buf, size_t bytes, size_t* needed) {
  if (h == nullptr) return BadArg("railyard_expert_manifest: NULL handle");
  const size_t n = h->manifestJson.size() + 1;
  if (needed) *needed = n;
  if (buf == nullptr || bytes < n) {
    // (New-user trial: "see *needed" with `needed` NULL.)
    return BadArg("railyard_expert_manifest: a buffer of " + std::to_string(bytes) + " bytes is smaller than the manifest (" +
                  std::to_string(n) + " bytes with its NUL)" + (needed ? ", which *needed now holds" : ""));
  }
  std::memcpy(buf, h->manifestJson.c_str(), n);
  return Report(Status::Ok());
}

RAILYARD_API int railyard_expert_fetch(railyard_expert* h, uint32_t layer, uint64_t expert, uint64_t arenaOffset) {
  if (h == nullptr) return BadArg("railyard_expert_fetch: NULL handle");
  return Report(h->client->Fetch(layer, expert, arenaOffset));
}

RAILYARD_API int railyard_expert_fetch_batch(railyard_expert* h, const railyard_expert_record* records, size_t count) {
  if (h == nullptr || (records == nullptr && count > 0)) return BadArg("railyard_expert_fetch_batch: NULL handle or records");
  std::vector<railyard::expert::RecordRequest> batch(count);
  for (size_t i = 0; i < count; ++i) {
    if (records[i].reserved != 0) return BadArg("railyard_expert_fetch_batch: a record's reserved field is not 0");
    batch[i] = {records[i].layer, records[i].expert, records[i].arena_offset};
  }
  return Report(h->client->FetchBatch(batch));
}

RAILYARD_API int railyard_expert_set_verify(railyard_expert* h, int verify) {
  if (h == nullptr) return BadArg("railyard_expert_set_verify: NULL handle");
  h->client->SetVerifyChecksums(verify != 0);
  return Report(Status::Ok());
}

RAILYARD_API int railyard_expert_close(railyard_expert* h) {
  if (h == nullptr) return Report(Status::Ok());  // clears the last error, as every successful call
  const Status s = h->client->Close();
  delete h;
  return Report(s);
}

RAILYARD_API const char* railyard_expert_last_error(void) { return g_lastError.c_str(); }

RAILYARD_API const char* railyard_expert_error_name(int code) {
  // The header's causes only (0..RAILYARD_EXPERT_EINVALID_ARGUMENT): the packer's own
  // (kPackInput) is no call's return value here (C API trial: 15 was "PACK_INPUT").
  if (code < 0 || code > RAILYARD_EXPERT_EINVALID_ARGUMENT) return "UNKNOWN";
  return railyard::expert::ExpertErrcName(static_cast<ExpertErrc>(code));
}

}  // extern "C"
