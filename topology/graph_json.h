// JSON and text views of a ClusterGraph from one host's point of view, shared by
// railyardd and railyard-info.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "topology/cluster_graph.h"

namespace railyard::topology {

/// {"self": {...}, "shape": "ring", "hosts": [{"id","name"}], "links": [{"a": end, "b": end}],
///  "routes": [{"peer","name","hops","reachable","direct":[{"local_if","local_address","peer_if",
///  "peer_address","speed_mbps"}],"next_hops":[names]}]}. Host ids are hex strings. A
///  host the graph knows but has no path to: "hops": 0, "reachable": false, no direct
///  rails or next hops (the text form says "unreachable").
/// Dump it with DumpJson (a plain dump() throws on a name that is not UTF-8).
nlohmann::json GraphToJson(const ClusterGraph& g, uint64_t self);

/// `j` as text that never throws: a string that is not valid UTF-8 (it should
/// never get here: names are sanitized where they enter, topology/utf8_name.h)
/// is written with U+FFFD in place of each bad byte. `indent` as json::dump.
std::string DumpJson(const nlohmann::json& j, int indent = -1);

/// Human-readable neighbours, shape and route table (several lines).
std::string GraphToText(const ClusterGraph& g, uint64_t self);

/// How many hosts `g` holds, for the shape lines: "4 hosts", "3 hosts (+1 with no
/// cable)", or, while no host has a cable up, "no cable up (this host alone)" / "no cable
/// up (N hosts known)" (new-user trial: "0 hosts (+1 with no cable)" at a daemon's start).
std::string HostCountText(const ClusterGraph& g);

/// 16-digit lowercase hex of a host id.
std::string HostIdText(uint64_t id);

}  // namespace railyard::topology
