#include "tools/railyardd/snapshot_serve.h"

#include "plugin/snapshot_runtime.h"

namespace railyard::tools {

Status SnapshotService::Start(const SnapshotFlags& flags, const env::Config& cfg, std::unique_ptr<SnapshotService>* out) {
  storage::snapshot::ServerOptions so;
  for (const std::string& text : flags.arenas) {
    storage::snapshot::ArenaSpec spec;
    RY_RETURN_IF_ERROR(storage::snapshot::ParseArenaSpec(text, &spec));
    so.arenas.push_back(spec);
  }
  fabric::Domain* domain = nullptr;
  fabric::RegistrationCache* cache = nullptr;
  RY_RETURN_IF_ERROR(plugin::SnapshotFabric(&domain, &cache));
  // Default: the first rail with an IPv4 address (a verbs rail on an IB port has none),
  // else loopback.
  so.address = flags.address;
  for (const fabric::RailInfo& r : domain->rails()) {
    if (so.address.empty() && !r.address.empty()) so.address = r.address;
  }
  if (so.address.empty()) so.address = "127.0.0.1";
  so.port = flags.port;
  so.swapDir = cfg.swapDir;
  so.swapSync = cfg.swapSync != 0;
  so.timeoutMs = cfg.timeoutMs;
  std::unique_ptr<SnapshotService> s(new SnapshotService);
  s->address_ = so.address;
  RY_RETURN_IF_ERROR(domain->CreateWorker(&s->worker_));
  RY_RETURN_IF_ERROR(storage::snapshot::SnapshotServer::Start(*cache, *s->worker_, so, &s->server_));
  *out = std::move(s);
  return Status::Ok();
}

SnapshotService::~SnapshotService() {
  server_.reset();  // before its Worker
  worker_.reset();
}

}  // namespace railyard::tools
