// The fabric Domain the expert tier uses until the process runtime object (ncomms
// branch) owns one: a TCP Domain whose rails are RAILYARD_SOCKET_IFNAME's IPv4
// addresses, or 127.0.0.1 when it is unset (DESIGN.md §3). railyardd's
// --expert-store and the railyard_expert_* C API both call it; re-point this one
// file at the runtime object when it lands.
#pragma once

#include <memory>

#include "env/config.h"
#include "proxy/fabric/domain.h"

namespace railyard::plugin {

/// Creates the Domain. SystemError/InvalidArgument when the interfaces the filter
/// names have no IPv4 address or cannot be listed.
Status CreateExpertDomain(const env::Config& config, std::unique_ptr<fabric::Domain>* out);

}  // namespace railyard::plugin
