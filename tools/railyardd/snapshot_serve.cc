#include "tools/railyardd/snapshot_serve.h"

#include <string>
#include <string_view>

#include "plugin/snapshot_runtime.h"

namespace railyard::tools {
namespace {

// The one "snapshot: " prefix of every error Start returns: storage::snapshot's own messages
// carry it already (they reach C API users too), the others (arena specs, the fabric, the
// swap directory) get it here; main.cc adds only "railyardd: ".
Status OnePrefix(Status s) {
  constexpr std::string_view kPrefix = "snapshot: ";
  const std::string_view m = s.message();
  // The server's own ("snapshot server: kind 'a' given twice") are prefixed already too
  // (new-user trial: "snapshot: snapshot server: ...").
  if (s.ok() || m.starts_with(kPrefix) || m.starts_with("snapshot server: ")) return s;
  return Status(s.code(), std::string(kPrefix) + s.message());
}

}  // namespace

Status SnapshotService::Start(const SnapshotFlags& flags, const env::Config& cfg, std::unique_ptr<SnapshotService>* out) {
  storage::snapshot::ServerOptions so;
  for (const std::string& text : flags.arenas) {
    storage::snapshot::ArenaSpec spec;
    RY_RETURN_IF_ERROR(OnePrefix(storage::snapshot::ParseArenaSpec(text, &spec)));
    so.arenas.push_back(spec);
  }
  fabric::Domain* domain = nullptr;
  fabric::RegistrationCache* cache = nullptr;
  RY_RETURN_IF_ERROR(OnePrefix(plugin::SnapshotFabric(cfg, &domain, &cache)));
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
  RY_RETURN_IF_ERROR(OnePrefix(domain->CreateWorker(&s->worker_)));
  s->options_ = so;
  RY_RETURN_IF_ERROR(OnePrefix(storage::snapshot::SnapshotServer::Start(*cache, *s->worker_, so, &s->server_)));
  *out = std::move(s);
  return Status::Ok();
}

std::vector<std::string> SnapshotService::ArenaReport() const {
  auto count = [](uint64_t n, const char* one) { return std::to_string(n) + " " + one + (n == 1 ? "" : "s"); };
  std::vector<std::string> lines;
  for (const storage::snapshot::ArenaSpec& a : options_.arenas) {
    std::string line = "snapshot kind '" + a.kind + "' (";
    if (a.mode == storage::snapshot::Mode::kRaw) {
      line += a.slots != 0 ? "raw, " + count(a.slots, "slot") + " of " + std::to_string(a.blobBytes) + " bytes)"
                           : "raw, blobs of " + std::to_string(a.blobBytes) + " bytes, sized by its first client up to " +
                                 std::to_string(a.maxBytes) + " bytes)";
      lines.push_back(std::move(line));
      continue;
    }
    const storage::snapshot::PagingStats st = server_->Stats(a.kind);
    line += "paging, " + count(a.slots, "slot") + " of " + std::to_string(a.blobBytes) + " bytes, swap in " +
            options_.swapDir + ", sync " + (options_.swapSync ? "on" : "off") + "): ";
    if (st.rebuilt == 0 && st.tornDropped == 0) {
      line += options_.swapSync ? "empty, no committed blob in the swap file" : "empty (without sync nothing is kept)";
    } else {
      line += count(st.rebuilt, "committed blob") + " recovered";
      if (st.tornDropped > 0) line += ", " + count(st.tornDropped, "torn record") + " dropped";
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

SnapshotService::~SnapshotService() {
  server_.reset();  // before its Worker
  worker_.reset();
}

}  // namespace railyard::tools
