#include "proxy/fabric/relay/seat_forwarder.h"

#include "topology/cluster_key.h"

namespace railyard::fabric::relay {

GraphFn RouterGraph(const proxy::Router& router) {
  return [r = &router] { return r->Agent().Graph(); };
}

Status StartSeatForwarder(const proxy::Router& router, const proxy::RelayService& relay, const env::Config& config,
                          int rank, std::unique_ptr<ForwarderHost>* out, std::shared_ptr<proxy::verbs::IbPorts> ib,
                          bool openIb) {
  std::shared_ptr<const topology::ClusterKey> key;
  RY_RETURN_IF_ERROR(topology::LoadClusterKey(config.clusterKeyFile, &key));
  ForwarderHostOptions o = ForwarderHostOptions::FromConfig(config, std::move(key));
  o.relay.rank = rank;
  o.openIb = openIb;
  o.ib = std::move(ib);
  return ForwarderHost::Start(RouterGraph(router), router.HostId(), [s = &relay] { return s->Relaying(); },
                              std::move(o), out);
}

}  // namespace railyard::fabric::relay
