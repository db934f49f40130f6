// See collnet_runtime.h: the glue that creates the CollNet Domain (one file, DESIGN.md §3).
#include "plugin/collnet_runtime.h"

#include <arpa/inet.h>

#include <memory>
#include <mutex>

#include "env/config.h"
#include "env/log.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "topology/netdev.h"

namespace railyard::plugin::collnet {
namespace {

constexpr size_t kMaxHandleRails = 6;  // 16 + 12 x rails bytes of Worker address, in a 128-byte handle

struct State {
  std::mutex mu;
  int refs = 0;
  std::unique_ptr<fabric::Domain> domain;
  std::unique_ptr<fabric::RegistrationCache> cache;
  collectives::CollOptions options;
};
State& S() {
  static State* s = new State;  // never destroyed: proxy threads may outlive static teardown
  return *s;
}

Status Create(State& s) {
  const env::Config* cfg = nullptr;
  RY_RETURN_IF_ERROR(env::Load(&cfg));
  std::vector<fabric::RailInfo> rails;
  std::vector<topology::NetDevice> devs;
  if (topology::SelectSocketDevices(cfg->socketIfname, &devs).ok()) {
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
  s.options.chunkBytes = cfg->collnetChunkBytes / 8 * 8;
  s.options.slots = static_cast<uint32_t>(cfg->collnetSlots);
  RY_INFO(log::kNet | log::kInit, "CollNet: fabric %s over %zu rail(s), first %s (%s)",
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

}  // namespace railyard::plugin::collnet
