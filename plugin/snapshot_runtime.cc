#include "plugin/snapshot_runtime.h"

#include <memory>
#include <mutex>
#include <vector>

#include "env/config.h"
#include "proxy/runtime/process_domain.h"

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
  runtime::ProcessDomainOptions o;
  o.ifname = cfg->railIfname;  // RAILYARD_SOCKET_IFNAME; unset: loopback only
  o.loopbackWhenUnset = true;
  o.who = "snapshot";
  RY_RETURN_IF_ERROR(runtime::CreateProcessDomain(*cfg, o, &s.domain));
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
