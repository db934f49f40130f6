#include "proxy/fabric/tcp/tcp_domain.h"

#include <arpa/inet.h>

#include "proxy/fabric/accept_sources.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/tcp/tcp_worker.h"

namespace railyard::fabric::tcp {

TcpOptions TcpOptions::FromConfig(const env::Config& config, std::vector<RailInfo> rails) {
  TcpOptions o;
  o.rails = std::move(rails);
  o.stripe = StripeOptions::FromConfig(config);
  o.timeoutMs = config.timeoutMs;
  o.connectRetryMs = config.timeoutMs;
  o.helloTimeoutMs = config.acceptTimeoutMs;
  return o;
}

Status TcpOptions::Validate() const {
  if (rails.empty() || rails.size() > WorkerAddress::kMaxRails) {
    return InvalidArgument("TCP fabric domain with " + std::to_string(rails.size()) + " rails (1..16)");
  }
  for (size_t i = 0; i < rails.size(); ++i) {
    in_addr a{};
    if (inet_pton(AF_INET, rails[i].address.c_str(), &a) != 1) {
      return InvalidArgument("TCP fabric rail " + std::to_string(i) + " address '" + rails[i].address +
                             "' is not an IPv4 address");
    }
  }
  if (socketsPerRail < 1 || socketsPerRail > 16) {
    return InvalidArgument("TCP fabric sockets per rail " + std::to_string(socketsPerRail) + " (1..16)");
  }
  if (static_cast<uint64_t>(socketsPerRail) * rails.size() > kMaxSocketsPerConnection) {
    return InvalidArgument("TCP fabric: more than 64 sockets per connection");
  }
  if (pumpBytes < 4096 || pumpBytes > (64ull << 20)) {
    return InvalidArgument("TCP fabric pump bytes " + std::to_string(pumpBytes) + " (4 KiB..64 MiB)");
  }
  AcceptSources sources;
  RY_RETURN_IF_ERROR(AcceptSources::Parse(acceptOnlyFrom, "TCP fabric", &sources));
  if (timeoutMs < 1) return InvalidArgument("TCP fabric timeout " + std::to_string(timeoutMs) + " ms");
  if (maxPeerConnections < 1 || maxPeerConnections > 65536) {
    return InvalidArgument("TCP fabric peer connections " + std::to_string(maxPeerConnections) + " (1..65536)");
  }
  if (connectRetryMs < 0) {
    return InvalidArgument("TCP fabric connect retry " + std::to_string(connectRetryMs) + " ms (0 or more)");
  }
  return stripe.Validate();
}

Status CreateTcpDomain(const TcpOptions& options, std::unique_ptr<Domain>* out) {
  RY_RETURN_IF_ERROR(options.Validate());
  *out = std::make_unique<TcpDomain>(options);
  return Status::Ok();
}

TcpDomain::TcpDomain(TcpOptions options)
    : options_(std::move(options)),
      regions_(options_.sharedRegions ? options_.sharedRegions : std::make_shared<RegionTable>()) {
  caps_.flags = kCapSend | kCapWrite | kCapWriteImm | kCapRead | kCapFetchAdd | kCapFence | kCapHostMemory |
                kCapPreciseRemoteErrors | kCapTargetCpuChecks | kCapMultiProcess;
  if (options_.rails.size() > 1) caps_.flags |= kCapStriping;
  caps_.maxRecordBytes = kMaxRecordBytes;
  caps_.maxOpBytes = kMaxOpBytes;
  caps_.maxOpsInFlight = kOpWindow;
}

Status TcpDomain::Register(void* addr, uint64_t bytes, uint32_t access, MemoryKind kind, const Region** out) {
  if (kind != MemoryKind::kHost) {
    return InvalidUsage("the TCP fabric transport cannot read device memory (no kCapDeviceMemory)");
  }
  std::shared_ptr<RegionRecord> rec;
  RY_RETURN_IF_ERROR(regions_->Register(addr, bytes, access, kind, &rec));
  *out = &rec->region();
  return Status::Ok();
}

Status TcpDomain::Deregister(const Region* region) { return regions_->Deregister(region); }

Status TcpDomain::CreateWorker(std::unique_ptr<Worker>* out) { return TcpWorker::Create(this, out); }

}  // namespace railyard::fabric::tcp
