#include "plugin/snapshot_runtime.h"

#include <arpa/inet.h>

#include <memory>
#include <mutex>
#include <vector>

#include "env/config.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/routing/router.h"

namespace railyard::plugin {
namespace {

struct SnapshotFabricState {
  std::once_flag once;
  Status status;
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
};

SnapshotFabricState& State() {
  static auto* s = new SnapshotFabricState;  // never destroyed: handles may outlive static teardown
  return *s;
}

Status Create(SnapshotFabricState& s) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  std::vector<fabric::RailInfo> rails;
  if (!cfg->railIfname.empty()) {
    std::vector<proxy::FabricRail> found;
    std::string whyNone;
    RY_RETURN_IF_ERROR(proxy::SelectFabricRails(cfg->railIfname, cfg->defaultSpeedMbps, &found, &whyNone));
    for (const proxy::FabricRail& r : found) {
      if (rails.size() == fabric::RemoteKey::kMaxRails) break;
      char a[INET_ADDRSTRLEN] = {};
      ::inet_ntop(AF_INET, &r.addr, a, sizeof a);
      rails.push_back(fabric::RailInfo{r.ifname, a, static_cast<uint32_t>(r.speedMbps)});
    }
    if (rails.empty()) return InvalidUsage("snapshot: RAILYARD_SOCKET_IFNAME leaves no rail: " + whyNone);
  } else {
    rails.push_back(fabric::RailInfo{"lo", "127.0.0.1", static_cast<uint32_t>(cfg->defaultSpeedMbps)});
  }
  RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(fabric::tcp::TcpOptions::FromConfig(*cfg, rails), &s.domain));
  s.cache = std::make_unique<fabric::RegistrationCache>(*s.domain);
  return Status::Ok();
}

}  // namespace

Status SnapshotFabric(fabric::Domain** domain, fabric::RegistrationCache** cache) {
  SnapshotFabricState& s = State();
  std::call_once(s.once, [&] { s.status = Create(s); });
  if (!s.status.ok()) return s.status;
  *domain = s.domain.get();
  *cache = s.cache.get();
  return Status::Ok();
}

}  // namespace railyard::plugin
