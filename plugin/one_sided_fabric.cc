#include "plugin/one_sided_fabric.h"

#include <mutex>

#include "env/log.h"
#include "proxy/runtime/process_fabric.h"

namespace railyard::plugin {
namespace {

struct OneSidedState {
  std::mutex mu;
  int refs = 0;
  const env::Config* config = nullptr;
  runtime::FabricLease lease;  ///< one lease for GIN, RMA and CollNet together
};

OneSidedState& S() {
  static OneSidedState* s = new OneSidedState;  // never destroyed: proxy threads may outlive static teardown
  return *s;
}

Status Create(OneSidedState& s, const char* who) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  runtime::LeaseOptions o;
  o.domain.ifname = cfg->socketIfname;  // NCCL's interface choice, as the net plugin's devices
  o.domain.maxRails = kOneSidedMaxRails;
  o.domain.who = who;
  // No single peer (GIN and CollNet mesh every rank): NCCL's device when it is the only
  // one, else an own Domain over every rail.
  o.everyRank = true;
  RY_RETURN_IF_ERROR(runtime::AcquireProcessFabric(*cfg, o, &s.lease));
  s.config = cfg;
  return Status::Ok();
}

}  // namespace

Status AcquireOneSidedFabric(const char* who, OneSidedFabric* out) {
  OneSidedState& s = S();
  std::lock_guard lock(s.mu);
  if (s.refs == 0) {
    RY_RETURN_IF_ERROR(Create(s, who));
  }
  ++s.refs;
  *out = OneSidedFabric{s.lease.domain, s.lease.cache, s.config};
  return Status::Ok();
}

void ReleaseOneSidedFabric() {
  OneSidedState& s = S();
  std::lock_guard lock(s.mu);
  if (s.refs == 0) return;
  if (--s.refs == 0) runtime::ReleaseProcessFabric(&s.lease);
}

}  // namespace railyard::plugin
