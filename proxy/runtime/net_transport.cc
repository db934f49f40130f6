// The transport choice of the process's NetRuntime: which RDMA ports open (verbs
// mode, fabric mode with verbs, or TCP only) and which comms serve NCCL (the comms
// written once over the fabric, proxy/nccl/, or the older per-transport ones).
#include <arpa/inet.h>

#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "env/log.h"
#include "proxy/mr_cache.h"
#include "proxy/runtime/comms_choice.h"
#include "proxy/runtime/net_state.h"

namespace railyard::runtime {

bool ChoosesFabricComms(const CommsFacts& f) {
  if (f.comms == "legacy") return false;
  if (f.verbsMode) return true;
  // Fabric mode: the comms over the CableSetDomain. With RDMA ports (any usable port of
  // this host, on a rail or not) only when asked: they pass every soft-RoCE ring test,
  // but ran at 0.52-0.69 of the older comms' speed direct and 0.46-0.81 relayed there;
  // auto keeps the older comms until they are not slower.
  if (f.fabricMode) return f.comms == "fabric" || !f.rdma;
  if (f.rdma) return false;  // RDMA ports opened outside verbs mode: not a plain TCP process
  return f.ipv4Devices;
}

std::string CommsChoiceReason(const CommsFacts& f) {
  if (f.comms == "legacy") return "RAILYARD_COMMS=legacy";
  if (f.verbsMode) return "verbs mode";
  if (f.fabricMode && !f.rdma) return "fabric mode over TCP rails";
  if (f.fabricMode && f.comms == "fabric") return "RAILYARD_COMMS=fabric, fabric mode with RDMA ports";
  if (f.fabricMode) {
    return "fabric mode on a host with RDMA ports: RAILYARD_COMMS=auto keeps the older comms (the fabric comms "
           "ran at 0.46-0.81 of their speed over RDMA, docs/benchmarks.md)";
  }
  if (f.rdma) return "RDMA ports outside verbs mode";
  if (f.ipv4Devices) return "plain TCP over IPv4 devices";
  return "plain TCP with a device that is not IPv4 (the fabric's TCP transport binds IPv4 only)";
}

bool FabricCommsRefused(const CommsFacts& f) { return f.comms == "fabric" && !ChoosesFabricComms(f); }

std::string CommsName(const CommsFacts& f) {
  if (!ChoosesFabricComms(f)) return "the older per-transport comms (proxy/tcp, proxy/verbs)";
  const std::string name = "the fabric-interface comms (proxy/nccl) over ";
  if (f.fabricMode) return name + "the cabled fabric (fabric mode)";
  return name + (f.verbsMode ? "the fabric's verbs transport" : "the fabric's TCP transport") + " alone (no fabric mode)";
}

}  // namespace railyard::runtime

namespace railyard::runtime::detail {

using Global = NetState;  // UsesFabricComms keeps its signature's shape (plugin/net.cc history)

/// This process's facts for the comms rule. Requires the devices and the transport choice.
static CommsFacts CommsFactsOf(const Global& g) {
  CommsFacts f;
  f.comms = g.config->comms;
  f.fabricMode = g.fabricMode;
  f.verbsMode = g.verbsMode;
  f.rdma = g.ib != nullptr && g.ib->size() > 0;
  f.ipv4Devices = !g.devices.empty() && std::all_of(g.devices.begin(), g.devices.end(), [](const topology::NetDevice& d) {
    return d.family() == AF_INET;
  });
  return f;
}

/// THE one place that chooses between the comms written once over the fabric
/// (proxy/nccl/) and the older per-transport comms (proxy/tcp, proxy/verbs): the
/// rule is ChoosesFabricComms (comms_choice.h), over this process's facts; it logs
/// the choice (INFO) and a refused RAILYARD_COMMS=fabric (WARN).
bool UsesFabricComms(const Global& g) {
  const CommsFacts f = CommsFactsOf(g);
  const bool fabric = ChoosesFabricComms(f);
  if (FabricCommsRefused(f)) {
    RY_WARN("RAILYARD_COMMS=fabric is not honoured: %s; the older comms (proxy/tcp) carry the traffic",
            CommsChoiceReason(f).c_str());
  }
  RY_INFO(log::kInit | log::kNet, "Railyard NCCL comms: %s (%s)",
          CommsName(f).c_str(), CommsChoiceReason(f).c_str());
  return fabric;
}

Status ChooseTransport(NetState& g, const env::Config& cfg, bool fabric) {
  if (cfg.transport == "tcp") return Status::Ok();
  std::vector<std::string> skipped;
  Status s = proxy::verbs::IbPorts::Open(cfg, &g.ib, &skipped);
  if (s.ok() && g.ib->size() == 0) {
    std::string why;
    for (const auto& k : skipped) why += "; " + k;
    s = SystemError("no usable RDMA port" + (why.empty() ? std::string(" (no RDMA device)") : why));
  }
  if (!s.ok()) {
    g.ib.reset();
    if (cfg.transport == "verbs") {
      return Status(s.code(), "RAILYARD_TRANSPORT=verbs: " + s.message() +
                                  " (use RAILYARD_TRANSPORT=auto or tcp on hosts without RDMA, or run "
                                  "the soft-RoCE lane: tests/lanes/rxe/README.md)");
    }
    RY_INFO(log::kInit | log::kNet, "Railyard uses TCP: %s", s.message().c_str());
    return Status::Ok();
  }
  // The older comms register in the MR cache's hardware backend; the fabric comms
  // (verbs mode unless RAILYARD_COMMS=legacy; fabric mode over RDMA ports only with
  // RAILYARD_COMMS=fabric, see UsesFabricComms) register through their Domains (the MR
  // cache stays software).
  if (cfg.comms == "legacy" || (fabric && cfg.comms != "fabric")) proxy::GlobalMrCache().SetBackend(g.ib.get());
  if (fabric) {
    // Switchless: peers on a cable get verbs QPs on that cable's ports; peers
    // further away go through relays over TCP. NCCL still sees one device.
    g.fabricVerbs = true;
    return Status::Ok();
  }
  g.verbsMode = true;
  for (size_t i = 0; i < g.ib->size(); ++i) {
    g.verbsDevs.push_back({{static_cast<int>(i)}, g.ib->at(i).device});
  }
  return Status::Ok();
}

runtime::FabricRuntime::VerbsDevice VerbsRuntimeDevice(const NetState& g, const NetState::VerbsDev& vd) {
  runtime::FabricRuntime::VerbsDevice d;
  d.name = vd.name;
  for (int p : vd.ports) d.ports.push_back(g.ib->at(static_cast<size_t>(p)).Name());
  return d;
}

/// Its Workers' bootstrap listeners bind the first RAILYARD_SOCKET_IFNAME interface
/// when it is IPv4 (where the older verbs comms put their control sockets), else the
/// first port's address. The Domains are built on the ports init opened (g.ib), never
/// rediscovered per device (seconds each under emulation).
Status CreateVerbsRuntime(NetState& g, std::unique_ptr<runtime::FabricRuntime>* out) {
  std::vector<runtime::FabricRuntime::VerbsDevice> devs;
  for (const NetState::VerbsDev& vd : g.verbsDevs) devs.push_back(VerbsRuntimeDevice(g, vd));
  std::string bootstrap;
  if (!g.devices.empty() && g.devices[0].family() == AF_INET) bootstrap = g.devices[0].addrString;
  // Non-owning: g.ib stays open for the life of the process (NCCL may still hold
  // registrations after finalize), longer than the runtime, which is never freed.
  std::shared_ptr<proxy::verbs::IbPorts> ports(std::shared_ptr<void>(), g.ib.get());
  return runtime::FabricRuntime::CreateVerbs(*g.config, devs, bootstrap, out, std::move(ports));
}

}  // namespace railyard::runtime::detail
