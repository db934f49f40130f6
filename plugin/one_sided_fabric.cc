#include "plugin/one_sided_fabric.h"

#include <sys/socket.h>

#include <memory>
#include <mutex>
#include <vector>

#include "env/log.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "topology/netdev.h"

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
  std::vector<fabric::RailInfo> rails;
  std::vector<topology::NetDevice> devs;
  if (topology::SelectSocketDevices(cfg->socketIfname, &devs).ok()) {
    for (const auto& d : devs) {
      if (d.family() != AF_INET || rails.size() == kOneSidedMaxRails) continue;
      rails.push_back(fabric::RailInfo{d.name, d.addrString, uint32_t(d.SpeedOr(cfg->defaultSpeedMbps))});
    }
  }
  if (rails.empty()) rails.push_back(fabric::RailInfo{"lo", "127.0.0.1", uint32_t(cfg->defaultSpeedMbps)});
  RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(fabric::tcp::TcpOptions::FromConfig(*cfg, rails), &s.domain));
  s.cache = std::make_unique<fabric::RegistrationCache>(*s.domain);
  s.config = cfg;
  RY_INFO(log::kNet | log::kInit, "%s: fabric %s over %zu rail(s), first %s (%s)", who,
          s.domain->TransportName(), rails.size(), rails[0].device.c_str(), rails[0].address.c_str());
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
