#include "plugin/one_sided_fabric.h"

#include <memory>
#include <mutex>
#include <vector>

#include "env/log.h"
#include "proxy/runtime/process_domain.h"

namespace railyard::plugin {
namespace {

struct State {
  std::mutex mu;
  int refs = 0;
  const env::Config* config = nullptr;
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
};

State& S() {
  static State* s = new State;  // never destroyed: proxy threads may outlive static teardown
  return *s;
}

Status Create(State& s, const char* who) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  runtime::ProcessDomainOptions o;
  o.ifname = cfg->socketIfname;  // NCCL's interface choice, as the net plugin's devices
  o.maxRails = kOneSidedMaxRails;
  o.who = who;
  RY_RETURN_IF_ERROR(runtime::CreateProcessDomain(*cfg, o, &s.domain));
  s.cache = std::make_unique<fabric::RegistrationCache>(*s.domain);
  s.config = cfg;
  return Status::Ok();
}

}  // namespace

Status AcquireOneSidedFabric(const char* who, OneSidedFabric* out) {
  State& s = S();
  std::lock_guard lock(s.mu);
  if (s.refs == 0) {
    if (Status st = Create(s, who); !st.ok()) {
      s.cache.reset();
      s.domain.reset();
      return st;
    }
  }
  ++s.refs;
  *out = OneSidedFabric{s.domain.get(), s.cache.get(), s.config};
  return Status::Ok();
}

void ReleaseOneSidedFabric() {
  State& s = S();
  std::lock_guard lock(s.mu);
  if (s.refs == 0) return;
  if (--s.refs == 0) {
    s.cache.reset();
    s.domain.reset();
  }
}

}  // namespace railyard::plugin
