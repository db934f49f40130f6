#include "tools/railyardd/tier_tunnels.h"

#include <filesystem>
#include <system_error>

#include "plugin/tier_route.h"
#include "storage/expert/store.h"

namespace railyard::tools {

Status TierTunnels::Start(const env::Config& cfg, const proxy::Router& router, const std::vector<proxy::FabricRail>& rails,
                          const TierTunnelFlags& flags, std::shared_ptr<proxy::verbs::IbPorts> ib,
                          std::unique_ptr<TierTunnels>* out) {
  std::unique_ptr<TierTunnels> t(new TierTunnels);
  const uint16_t port = static_cast<uint16_t>(cfg.tierTunnelPort);
  RY_RETURN_IF_ERROR(plugin::CreateTierDomain(cfg, router, rails, 0, &t->data_, std::move(ib)));
  t->cache_ = std::make_unique<fabric::RegistrationCache>(*t->data_);
  if (!flags.expertStore.empty()) {
    std::unique_ptr<expert::Store> store;
    RY_RETURN_IF_ERROR(expert::Store::Open(flags.expertStore, flags.expertVerify, &store));
    expert::ServerOptions o;
    o.listenAddress = "127.0.0.1";  // reached only through the tunnel
    o.pinCapBytes = cfg.expertPinCapBytes;
    o.timeoutMs = cfg.timeoutMs;
    RY_RETURN_IF_ERROR(t->data_->CreateWorker(&t->expertWorker_));
    RY_RETURN_IF_ERROR(expert::ExpertServer::Start(std::move(store), t->data_.get(), t->expertWorker_.get(), o, &t->expert_));
    RY_RETURN_IF_ERROR(plugin::CreateTierDomain(cfg, router, rails, port, &t->expertAcceptDomain_));
    storage::tunnel::TunnelOptions to;
    to.targetName = "railyardd's expert store";  // a dialer is told this, not its loopback port
    RY_RETURN_IF_ERROR(storage::tunnel::ControlTunnel::Accept(*t->expertAcceptDomain_, "127.0.0.1", t->expert_->port(), to,
                                                              &t->expertTunnel_));
    t->summary_ += "expert store " + flags.expertStore + " at tier tunnel port " + std::to_string(port);
  }
  if (!flags.snapshotArenas.empty()) {
    storage::snapshot::ServerOptions so;
    for (const std::string& text : flags.snapshotArenas) {
      storage::snapshot::ArenaSpec spec;
      RY_RETURN_IF_ERROR(storage::snapshot::ParseArenaSpec(text, &spec));
      so.arenas.push_back(spec);
    }
    so.address = "127.0.0.1";  // reached only through the tunnel
    if (!cfg.swapDir.empty()) {  // a swap file has one owner: this instance's live in a subdirectory
      so.swapDir = cfg.swapDir + "/fabric";
      std::error_code ec;
      std::filesystem::create_directories(so.swapDir, ec);
      if (ec) return SystemError("tier tunnel: cannot create " + so.swapDir + ": " + ec.message());
    }
    so.swapSync = cfg.swapSync != 0;
    so.timeoutMs = cfg.timeoutMs;
    RY_RETURN_IF_ERROR(t->data_->CreateWorker(&t->snapshotWorker_));
    RY_RETURN_IF_ERROR(storage::snapshot::SnapshotServer::Start(*t->cache_, *t->snapshotWorker_, so, &t->snapshot_));
    RY_RETURN_IF_ERROR(plugin::CreateTierDomain(cfg, router, rails, static_cast<uint16_t>(port + 1), &t->snapshotAcceptDomain_));
    storage::tunnel::TunnelOptions to;
    to.targetName = "railyardd's snapshot arenas";  // a dialer is told this, not its loopback port
    RY_RETURN_IF_ERROR(storage::tunnel::ControlTunnel::Accept(*t->snapshotAcceptDomain_, "127.0.0.1", t->snapshot_->port(),
                                                              to, &t->snapshotTunnel_));
    t->summary_ += std::string(t->summary_.empty() ? "" : "; ") + "snapshot arenas at tier tunnel port " +
                   std::to_string(port + 1) + (so.swapDir.empty() ? "" : " (swap in " + so.swapDir + ")");
  }
  *out = std::move(t);
  return Status::Ok();
}

TierTunnels::~TierTunnels() {
  expertTunnel_.reset();  // no new control connections first
  snapshotTunnel_.reset();
  if (expert_) expert_->Stop();
  expert_.reset();
  snapshot_.reset();
  expertWorker_.reset();  // Workers before their Domain and cache
  snapshotWorker_.reset();
  cache_.reset();
}

}  // namespace railyard::tools
