#include "plugin/expert_domain.h"

#include "proxy/runtime/process_domain.h"

namespace railyard::plugin {
namespace {

runtime::ProcessDomainOptions ExpertRails(const env::Config& config) {
  runtime::ProcessDomainOptions o;
  o.ifname = config.railIfname;  // RAILYARD_SOCKET_IFNAME; unset: loopback only
  o.loopbackWhenUnset = true;
  o.who = "expert";
  return o;
}

}  // namespace

Status CreateExpertDomain(const env::Config& config, std::unique_ptr<fabric::Domain>* out) {
  return runtime::CreateProcessDomain(config, ExpertRails(config), out);
}

Status AcquireExpertFabric(const env::Config& config, const std::string& peer, runtime::FabricLease* out) {
  runtime::LeaseOptions o;
  o.domain = ExpertRails(config);
  // "host:port" or "[v6]:port": the host part, when it is numeric IPv4 (else device 0).
  const size_t colon = peer.rfind(':');
  o.peerHost = colon == std::string::npos ? peer : peer.substr(0, colon);
  return runtime::AcquireProcessFabric(config, o, out);
}

}  // namespace railyard::plugin
