// Listen, connect and accept of the process's NetRuntime: which comm serves a
// device (the comms written once over the fabric, or the older TCP / verbs comms),
// over which ports or planned routes (fabric mode: cabled peers over the cable's RDMA
// ports, the rest over TCP through relays), and the registry of what is open.
#include <arpa/inet.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "proxy/handle.h"
#include "proxy/mr_cache.h"
#include "proxy/nccl/fabric_listen_comm.h"
#include "proxy/nccl/fabric_send_comm.h"
#include "proxy/runtime/net_state.h"
#include "proxy/tcp/tcp_listen_comm.h"
#include "topology/graph_json.h"

namespace railyard::runtime {

using namespace detail;
using proxy::ListenComm;
using proxy::RecvComm;
using proxy::SendComm;

namespace {

/// The comms' view of this process: host name and pid.
proxy::nccl::LocalIdentity Self(const NetState& g) { return {g.host, static_cast<uint32_t>(::getpid())}; }

/// The RankSource of an init context; a fresh one when `ctx` is NULL (the v8..v10
/// adapters pass none: the comms then learn the rank from their own sends).
std::shared_ptr<proxy::RankSource> RankOf(const CommContext* ctx) {
  return ctx != nullptr ? ctx->rank : std::make_shared<proxy::RankSource>();
}

int TrafficClassOf(const CommContext* ctx) { return ctx != nullptr ? ctx->trafficClass : -1; }

/// The older comms' settings `o` naming the context's rank in their errors.
template <typename Options>
Options WithRank(Options o, const CommContext* ctx) {
  o.rank = RankOf(ctx);
  return o;
}

/// A verbs setup whose comms name the context's rank in their errors.
proxy::verbs::VerbsDeviceSetup WithRank(proxy::verbs::VerbsDeviceSetup v, const CommContext* ctx) {
  v.options.rank = RankOf(ctx);
  return v;
}

}  // namespace

Status NetRuntime::Listen(CommContext* ctx, int dev, void* handle, ListenComm** listenComm) {
  RY_RETURN_IF_ERROR(CheckDevice(dev));
  NetState& g = g_;
  if (g.fabricComms) {
    std::unique_ptr<proxy::nccl::FabricListenComm> fl;
    RY_RETURN_IF_ERROR(proxy::nccl::FabricListenComm::Create(&g.fabric->comms(static_cast<size_t>(dev)),
                                                             static_cast<size_t>(dev), Self(g), &proxy::GlobalMrCache(),
                                                             RankOf(ctx), &fl, handle));
    std::lock_guard lock(g.mu);
    g.listens.insert(fl.get());
    *listenComm = fl.release();
    return Status::Ok();
  }
  std::unique_ptr<proxy::TcpListenComm> l;
  std::unique_ptr<ListenComm> verbsListen;
  proxy::ListenAddress addr;
  if (g.verbsMode) {
    // Control sockets on the first RAILYARD_SOCKET_IFNAME interface; data over RDMA.
    const topology::NetDevice& d = g.devices[0];
    const socklen_t len = d.family() == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::unique_ptr<proxy::verbs::VerbsListenComm> vl;
    RY_RETURN_IF_ERROR(proxy::verbs::VerbsListenComm::Create(d.addr, len, WithRank(VerbsSetupFor(g, dev, -1), ctx),
                                                             WithRank(OptionsFor(g, 0), ctx), g.host, &vl, &addr));
    proxy::EncodeHandle(addr, handle);
    std::lock_guard lock(g.mu);
    g.listens.insert(vl.get());
    *listenComm = vl.release();
    return Status::Ok();
  }
  if (g.fabricMode) {
    // Any rail (or a relay on loopback, or a local rank) may arrive: listen on all.
    sockaddr_storage any{};
    auto* a = reinterpret_cast<sockaddr_in*>(&any);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    if (g.fabricVerbs) {
      // Cabled peers arrive for a verbs handshake, relayed ones with TCP sockets.
      std::unique_ptr<proxy::verbs::VerbsListenComm> vl;
      RY_RETURN_IF_ERROR(proxy::verbs::VerbsListenComm::Create(any, sizeof(sockaddr_in),
                                                               WithRank(FabricVerbsSetup(g, AllPorts(g), -1), ctx),
                                                               WithRank(OptionsFor(g, dev), ctx),
                                                               g.router->HostName(), &vl, &addr));
      verbsListen = std::move(vl);
    } else {
      RY_RETURN_IF_ERROR(proxy::TcpListenComm::Create(any, sizeof(sockaddr_in), WithRank(OptionsFor(g, dev), ctx),
                                                      g.router->HostName(), &proxy::GlobalMrCache(), &l, &addr));
    }
    addr.hostId = g.router->HostId();
    for (const auto& r : g.fabricRails) addr.rails.push_back(r.addr);
    if (!g.fabricRails.empty()) {
      reinterpret_cast<sockaddr_in*>(&addr.addr)->sin_addr = g.fabricRails[0].addr;
    }
  } else {
    const topology::NetDevice& d = g.devices[static_cast<size_t>(dev)];
    const socklen_t len = d.family() == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    RY_RETURN_IF_ERROR(proxy::TcpListenComm::Create(d.addr, len, WithRank(OptionsFor(g, dev), ctx), g.host,
                                                    &proxy::GlobalMrCache(), &l, &addr));
  }
  proxy::EncodeHandle(addr, handle);
  std::unique_ptr<ListenComm> listen = verbsListen != nullptr ? std::move(verbsListen) : std::move(l);
  std::lock_guard lock(g.mu);
  g.listens.insert(listen.get());
  *listenComm = listen.release();
  return Status::Ok();
}

/// FabricHandleWire::stageMagic while stageState holds a FabricSendComm waiting for its
/// hello's acknowledgement ("RYFSENDP"; RouteMayCome's kStageMagic holds a time instead).
constexpr uint64_t kPendingSendMagic = 0x50444e4553465952ull;

Status NetRuntime::Connect(CommContext* ctx, int dev, void* handle, SendComm** sendComm) {
  RY_RETURN_IF_ERROR(CheckDevice(dev));
  NetState& g = g_;
  if (!g.fabricComms) return ConnectOlder(ctx, dev, handle, sendComm);
  // Validated on every call, before anything is trusted. The comm comes back once the
  // listener's Worker acknowledged its hello (NCCL calls connect again meanwhile), so
  // a peer that cannot be reached (a relay that refuses, nothing listening) fails this
  // connect with the Endpoint's error instead of leaving the peer's accept waiting.
  proxy::nccl::FabricHandle to;
  RY_RETURN_IF_ERROR(proxy::nccl::DecodeFabricHandle(handle, &to));
  auto* wire = static_cast<proxy::nccl::FabricHandleWire*>(handle);
  proxy::nccl::FabricSendComm* comm = nullptr;
  {
    std::lock_guard lock(g.mu);
    if (wire->stageMagic == kPendingSendMagic) {
      auto* p = reinterpret_cast<proxy::nccl::FabricSendComm*>(wire->stageState);
      if (g.pendingSends.count(p) != 0) comm = p;
    }
  }
  if (comm == nullptr) {
    std::unique_ptr<proxy::nccl::FabricSendComm> made;
    Status s = proxy::nccl::FabricSendComm::Create(&g.fabric->comms(static_cast<size_t>(dev)), static_cast<size_t>(dev),
                                                   to, Self(g), g.config->timeoutMs, RankOf(ctx), &made);
    if (!s.ok() && g.fabricMode && FabricModeRouteMayCome(g, handle, s)) return Status::Ok();  // NCCL calls again
    RY_RETURN_IF_ERROR(s);
    comm = made.release();
    std::lock_guard lock(g.mu);
    g.pendingSends.insert(comm);
    wire->stageMagic = kPendingSendMagic;
    wire->stageState = reinterpret_cast<uint64_t>(comm);
  }
  bool established = false;
  const Status e = comm->Established(&established);
  if (e.ok() && !established) return Status::Ok();  // NCCL calls again
  {
    std::lock_guard lock(g.mu);
    g.pendingSends.erase(comm);
    wire->stageMagic = 0;
    wire->stageState = 0;
    if (e.ok()) g.comms.insert(comm);
  }
  if (!e.ok()) {
    comm->Close();
    delete comm;
    return e;
  }
  *sendComm = comm;
  return Status::Ok();
}

Status NetRuntime::ConnectOlder(CommContext* ctx, int dev, void* handle, SendComm** sendComm) {
  NetState& g = g_;
  // Validate the handle on every call: a garbage or foreign handle fails here,
  // before its connect-state bytes are trusted.
  proxy::ListenAddress to;
  RY_RETURN_IF_ERROR(proxy::DecodeHandle(handle, &to));
  auto* wire = static_cast<proxy::HandleWire*>(handle);
  PendingConnect* pc = nullptr;
  {
    std::lock_guard lock(g.mu);
    if (wire->stageMagic == proxy::kStageMagic) {
      auto* p = reinterpret_cast<PendingConnect*>(wire->stageState);
      if (g.connects.count(p) != 0) pc = p;
    }
    if (pc == nullptr) {
      pc = new PendingConnect();
      pc->salt = g.connectSalt++;
      g.connects.insert(pc);
      wire->stageMagic = proxy::kStageMagic;
      wire->stageState = reinterpret_cast<uint64_t>(pc);
    }
  }
  auto finish = [&](SendComm* comm) {
    std::lock_guard lock(g.mu);
    g.connects.erase(pc);
    delete pc;
    wire->stageMagic = 0;
    wire->stageState = 0;
    if (comm != nullptr) g.comms.insert(comm);
  };
  proxy::TcpOptions options = WithRank(OptionsFor(g, g.verbsMode ? 0 : dev), ctx);
  Status s;
  if (g.verbsMode) {
    if (pc->verbs == nullptr) {
      s = proxy::verbs::VerbsConnector::Start(to, WithRank(VerbsSetupFor(g, dev, TrafficClassOf(ctx)), ctx), options, g.host,
                                              &pc->verbs);
    }
    SendComm* comm = nullptr;
    if (s.ok()) s = pc->verbs->Progress(&comm);
    if (!s.ok() || comm != nullptr) finish(comm);
    RY_RETURN_IF_ERROR(s);
    *sendComm = comm;
    return Status::Ok();
  }
  if (to.verbsRails != 0 && to.hostId == 0) {
    finish(nullptr);
    return InvalidUsage("transport mismatch: " + to.ToString() + " listens with the verbs transport and "
                        "this process uses TCP (set RAILYARD_TRANSPORT the same on every host)");
  }
  if (pc->connector == nullptr && pc->verbs == nullptr) {
    if (to.hostId != 0 && g.fabricMode) {
      // Router: plan each socket over the cabling (direct rails or relays).
      std::vector<proxy::SocketTarget> targets;
      bool ready = false;
      const uint16_t port = ntohs(reinterpret_cast<const sockaddr_in*>(&to.addr)->sin_port);
      s = g.router->PlanConnection(to.hostId, port, options.nsocks, pc->salt, &targets, &ready);
      if (s.ok() && !ready) {
        const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(proxy::Clock::now() - pc->since);
        if (waited.count() <= options.timeoutMs) return Status::Ok();  // the cabling graph may still be converging
        s = SystemError("no route to host " + to.host + " (" + topology::HostIdText(to.hostId) +
                        ") after " + std::to_string(waited.count()) +
                        " ms: it is not cabled to this host or any host that can relay");
      }
      std::vector<int> ports;
      if (s.ok() && g.fabricVerbs && to.verbsRails > 0) ports = CablePorts(g, targets);
      if (s.ok() && !ports.empty()) {
        // A neighbour: verbs QPs on the cable's ports; the control socket on the cable.
        s = proxy::verbs::VerbsConnector::Start(to, WithRank(FabricVerbsSetup(g, ports, TrafficClassOf(ctx)), ctx), options,
                                                g.router->HostName(), targets[0], &pc->verbs);
      } else if (s.ok()) {
        s = proxy::TcpConnector::Start(to, std::move(targets), options, g.router->HostName(), &pc->connector);
      }
    } else {
      s = proxy::TcpConnector::Start(to, options, g.host, &pc->connector);
    }
  }
  SendComm* comm = nullptr;
  if (s.ok()) s = pc->verbs != nullptr ? pc->verbs->Progress(&comm) : pc->connector->Progress(&comm);
  if (!s.ok() || comm != nullptr) finish(comm);
  RY_RETURN_IF_ERROR(s);
  *sendComm = comm;
  return Status::Ok();
}

Status NetRuntime::Accept(ListenComm* listen, RecvComm** recvComm) {
  RecvComm* comm = nullptr;
  RY_RETURN_IF_ERROR(listen->Accept(&comm));
  if (comm != nullptr) {
    NetState& g = g_;
    std::lock_guard lock(g.mu);
    g.comms.insert(comm);
  }
  *recvComm = comm;
  return Status::Ok();
}

Status NetRuntime::CloseComm(proxy::Comm* c) {
  NetState& g = g_;
  {
    std::lock_guard lock(g.mu);
    if (g.comms.erase(c) == 0) return InvalidArgument("close of a comm that is not open");
  }
  c->Close();
  delete c;
  return Status::Ok();
}

Status NetRuntime::CloseListen(ListenComm* l) {
  NetState& g = g_;
  {
    std::lock_guard lock(g.mu);
    if (g.listens.erase(l) == 0) return InvalidArgument("closeListen of a listen comm that is not open");
  }
  delete l;
  return Status::Ok();
}

}  // namespace railyard::runtime
