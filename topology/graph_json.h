// JSON and text views of a ClusterGraph from one host's point of view, shared by
// railyardd and railyard-info.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "topology/cluster_graph.h"

namespace railyard::topology {

/// {"self": {...}, "shape": "ring", "hosts": [{"id","name"}], "links": [{"a": end, "b": end}],
///  "routes": [{"peer","name","hops","direct":[{"local_if","local_address","peer_if",
///  "peer_address","speed_mbps"}],"next_hops":[names]}]}. Host ids are hex strings.
nlohmann::json GraphToJson(const ClusterGraph& g, uint64_t self);

/// Human-readable neighbours, shape and route table (several lines).
std::string GraphToText(const ClusterGraph& g, uint64_t self);

/// 16-digit lowercase hex of a host id.
std::string HostIdText(uint64_t id);

}  // namespace railyard::topology
