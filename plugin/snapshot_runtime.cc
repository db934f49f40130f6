#include "plugin/snapshot_runtime.h"

#include <mutex>

#include "env/config.h"

namespace railyard::plugin {
namespace {

struct SnapshotFabricState {
  std::once_flag once;
  Status status;
  runtime::FabricLease lease;
};

SnapshotFabricState& State() {
  static auto* s = new SnapshotFabricState;  // never destroyed: handles may outlive static teardown
  return *s;
}

}  // namespace

Status AcquireSnapshotFabric(const std::string& peerHost, const env::Config& cfg, runtime::FabricLease* out) {
  runtime::LeaseOptions o;
  o.domain.ifname = cfg.railIfname;  // RAILYARD_SOCKET_IFNAME (railyardd: its --ifname); unset: loopback only
  o.domain.loopbackWhenUnset = true;
  o.domain.who = "snapshot";
  o.peerHost = peerHost;
  return runtime::AcquireProcessFabric(cfg, o, out);
}

Status AcquireSnapshotFabric(const std::string& peerHost, runtime::FabricLease* out) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  return AcquireSnapshotFabric(peerHost, *cfg, out);
}

Status SnapshotFabric(fabric::Domain** domain, fabric::RegistrationCache** cache) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  return SnapshotFabric(*cfg, domain, cache);
}

Status SnapshotFabric(const env::Config& cfg, fabric::Domain** domain, fabric::RegistrationCache** cache) {
  SnapshotFabricState& s = State();
  std::call_once(s.once, [&] { s.status = AcquireSnapshotFabric("", cfg, &s.lease); });
  if (!s.status.ok()) return s.status;
  *domain = s.lease.domain;
  *cache = s.lease.cache;
  return Status::Ok();
}

}  // namespace railyard::plugin
