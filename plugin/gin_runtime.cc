// See gin_runtime.h: the GIN/RMA tables' view of the shared one-sided fabric.
#include "plugin/gin_runtime.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "env/log.h"
#include "plugin/net.h"
#include "plugin/one_sided_fabric.h"
#include "proxy/runtime/cable_set_domain.h"
#include "proxy/wire.h"

namespace railyard::plugin::gin {
namespace {

/// A CableSetWorker::Connect refusal that a fuller cabling graph clears: the peer's
/// rails on no cable known yet, or no route to its host yet.
bool NoRouteYet(const Status& s) {
  const std::string& m = s.message();
  return s.code() == Code::kInvalidUsage &&
         (m.find("reachable") != std::string::npos || m.find("no route from") != std::string::npos ||
          m.find("no rail of the peer") != std::string::npos);
}

}  // namespace

Status AcquireRuntime(Runtime* out) {
  OneSidedFabric f;
  RY_RETURN_IF_ERROR(AcquireOneSidedFabric("GIN/RMA", &f));
  out->domain = f.domain;
  out->cache = f.cache;
  out->options = railyard::gin::GinOptions{};
  out->options.timeoutMs = f.config->timeoutMs;
  out->options.queueDepth = 32 * proxy::kMaxRecvs;
  // regMrSymDmaBuf registers through the shared cache (never reused: another fd may
  // map other memory at the same address). A Domain that cannot register DMA-BUFs
  // (TCP: the CPU cannot read what the fd maps) refuses it with InvalidUsage naming
  // the transport (Domain::RegisterDmaBuf), and nothing is registered.
  fabric::RegistrationCache* cache = f.cache;
  out->options.acquireDmaBuf = [cache](void* data, uint64_t bytes, int fd, uint64_t offset, fabric::MemoryKind kind,
                                       const fabric::Region** region) {
    return cache->AcquireDmaBuf(data, bytes, fd, offset, fabric::kAccessAll, kind, region);
  };
  // Fabric mode over TCP rails reaches other hosts only through the cable set (relays
  // included); without it the lease is this process's own TCP Domain (plain TCP
  // rails, 127.0.0.1 when the interface choice names none), which would connect to
  // nothing on the other hosts, or to cabled neighbours only. Refused, naming why.
  if (plugin::InFabricMode() && dynamic_cast<runtime::CableSetDomain*>(f.domain) == nullptr &&
      std::string(f.domain->TransportName()) == "tcp") {
    const auto& rails = f.domain->rails();  // read before the release may destroy the Domain
    const std::string count = std::to_string(rails.size());
    const std::string first = rails.empty() ? "none" : rails[0].device + " " + rails[0].address;
    ReleaseOneSidedFabric();
    return InvalidUsage(
        "GIN/RMA in fabric mode runs over the host's cable set (relays to ranks on hosts with no cable), "
        "which exists only with the fabric comms (RAILYARD_COMMS auto or fabric, not legacy) and at most " +
        std::to_string(kOneSidedMaxRails) +
        " rails; this process's one-sided fabric is its own TCP Domain over " + count +
        " rail(s) (first " + first + "), which relays nothing: set RAILYARD_COMMS=fabric (or auto), or RAILYARD_FABRIC=off");
  }
  // Fabric mode's Domain routes by the cabling graph, which fills in as the agents
  // hear each other: a peer it cannot route to yet is tried again until the timeout
  // (as plugin/net.cc's fabric-mode connect does for the NCCL comms).
  if (dynamic_cast<runtime::CableSetDomain*>(f.domain) != nullptr) out->options.routeMayCome = &NoRouteYet;
  return Status::Ok();
}

void AwaitCables(fabric::Domain& domain, int timeoutMs) {
  auto* cs = dynamic_cast<runtime::CableSetDomain*>(&domain);
  if (cs == nullptr) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min(timeoutMs, 5000));
  std::string unplaced;
  while (true) {
    const topology::ClusterGraph g = cs->options().graph();
    const uint64_t self = cs->options().self;
    unplaced.clear();
    for (const fabric::RailInfo& r : cs->rails()) {
      bool placed = false;
      for (uint64_t n : g.Neighbours(self)) {
        for (const topology::RailLink& l : g.LinksBetween(self, n)) placed = placed || l.End(self).address == r.address;
      }
      if (!placed) unplaced += (unplaced.empty() ? "" : ",") + r.device + " " + r.address;
    }
    if (unplaced.empty()) return;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the cabling agent's thread fills the graph
  }
  RY_INFO(log::kNet | log::kInit, "GIN/RMA listen: the cabling graph places no cable on rail(s) %s yet: the comm's "
          "Worker leaves them out", unplaced.c_str());
}

void ReleaseRuntime() { ReleaseOneSidedFabric(); }

}  // namespace railyard::plugin::gin
