// Where the fabric relay runs: the one call railyardd and the plugin's fabric mode
// make to start the host's ForwarderHost (forwarder_host.h) beside the TCP relay
// (proxy/relay/relay_service.h). The Forwarder serves while that RelayService holds
// the host's relay seat (railyardd when it runs, else one rank process), over the
// cables the Router's cabling graph knows, at RAILYARD_FABRIC_RELAY_PORT.
#pragma once

#include <memory>

#include "env/config.h"
#include "proxy/fabric/relay/forwarder_host.h"
#include "proxy/relay/relay_service.h"
#include "proxy/routing/router.h"

namespace railyard::fabric::relay {

/// Starts the ForwarderHost for `router`'s host, serving while `relay->Relaying()`.
/// `router` and `relay` must outlive it (destroy it first). Options from `config`,
/// the cluster key from `router` (relay opens must carry its MAC when set); `rank`
/// is named in errors (-1: railyardd). `ib`: the process's RDMA ports when it has
/// opened them (the plugin); `openIb`: with no `ib`, the ForwarderHost opens them
/// itself for its verbs ports (railyardd; RAILYARD_FABRIC_RELAY_VERBS_PORT 0 opens
/// nothing); a rank process passes false (init found none). Errors of
/// ForwarderHost::Start.
Status StartSeatForwarder(const proxy::Router& router, const proxy::RelayService& relay, const env::Config& config,
                          int rank, std::unique_ptr<ForwarderHost>* out,
                          std::shared_ptr<proxy::verbs::IbPorts> ib = nullptr, bool openIb = true);

/// The GraphFn of `router` (its cabling agent's graph now); `router` must outlive it.
GraphFn RouterGraph(const proxy::Router& router);

}  // namespace railyard::fabric::relay
