#include "plugin/expert_domain.h"

#include "proxy/runtime/process_domain.h"

namespace railyard::plugin {

Status CreateExpertDomain(const env::Config& config, std::unique_ptr<fabric::Domain>* out) {
  runtime::ProcessDomainOptions o;
  o.ifname = config.railIfname;  // RAILYARD_SOCKET_IFNAME; unset: loopback only
  o.loopbackWhenUnset = true;
  o.who = "expert";
  return runtime::CreateProcessDomain(config, o, out);
}

}  // namespace railyard::plugin
