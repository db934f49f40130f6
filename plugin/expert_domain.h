// The fabric Domain the expert tier uses (railyardd --expert-store and the
// railyard_expert_* C API): runtime::CreateProcessDomain over RAILYARD_SOCKET_IFNAME, or
// 127.0.0.1 when it is unset; verbs when RAILYARD_TRANSPORT chooses it.
#pragma once

#include <memory>

#include "env/config.h"
#include "proxy/fabric/domain.h"

namespace railyard::plugin {

/// Creates the Domain. SystemError/InvalidArgument when the interfaces the filter
/// names have no IPv4 address or cannot be listed.
Status CreateExpertDomain(const env::Config& config, std::unique_ptr<fabric::Domain>* out);

}  // namespace railyard::plugin
