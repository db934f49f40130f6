// See gin_runtime.h: the glue that creates the GIN/RMA Domain (one file, DESIGN.md §3).
#include "plugin/gin_runtime.h"

#include <arpa/inet.h>

#include <mutex>

#include "env/config.h"
#include "env/log.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/wire.h"
#include "topology/netdev.h"

namespace railyard::plugin::gin {
namespace {

constexpr size_t kMaxHandleRails = 6;  // 16 + 16 × rails bytes of Worker address ≤ 120

struct State {
  std::mutex mu;
  int refs = 0;
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
  railyard::gin::GinOptions options;
};
State& S() {
  static State* s = new State;  // never destroyed: plugin threads may outlive static teardown
  return *s;
}

Status Create(State& s) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  std::vector<fabric::RailInfo> rails;
  std::vector<topology::NetDevice> devs;
  Status sel = topology::SelectSocketDevices(cfg->socketIfname, &devs);
  if (sel.ok()) {
    for (const auto& d : devs) {
      if (d.family() != AF_INET || rails.size() == kMaxHandleRails) continue;
      rails.push_back(fabric::RailInfo{d.name, d.addrString, uint32_t(d.SpeedOr(cfg->defaultSpeedMbps))});
    }
  }
  if (rails.empty()) rails.push_back(fabric::RailInfo{"lo", "127.0.0.1", uint32_t(cfg->defaultSpeedMbps)});
  fabric::tcp::TcpOptions opts = fabric::tcp::TcpOptions::FromConfig(*cfg, rails);
  RY_RETURN_IF_ERROR(fabric::tcp::CreateTcpDomain(opts, &s.domain));
  s.cache = std::make_unique<fabric::RegistrationCache>(*s.domain);
  s.options.timeoutMs = cfg->timeoutMs;
  s.options.queueDepth = 32 * proxy::kMaxRecvs;
  RY_INFO(log::kNet | log::kInit, "GIN/RMA: fabric %s over %zu rail(s), first %s (%s)",
          s.domain->TransportName(), rails.size(), rails[0].device.c_str(), rails[0].address.c_str());
  return Status::Ok();
}

}  // namespace

Status AcquireRuntime(Runtime* out) {
  State& s = S();
  std::lock_guard lock(s.mu);
  if (s.refs == 0) {
    Status st = Create(s);
    if (!st.ok()) {
      s.cache.reset();
      s.domain.reset();
      return st;
    }
  }
  ++s.refs;
  out->domain = s.domain.get();
  out->cache = s.cache.get();
  out->options = s.options;
  return Status::Ok();
}

void ReleaseRuntime() {
  State& s = S();
  std::lock_guard lock(s.mu);
  if (s.refs == 0) return;
  if (--s.refs == 0) {
    s.cache.reset();
    s.domain.reset();
  }
}

}  // namespace railyard::plugin::gin
