// The cabling graph of this process's own cabling agent, for readers that cannot be
// handed the agent (the CollNet tables live beside the net table, which starts the
// agent in fabric mode: proxy/runtime/net_fabric_mode.cc StartFabric -> proxy::Router -> CablingAgent).
// A CablingAgent publishes itself here when Start succeeds and withdraws first thing in
// its destructor, so a reader never sees a dying agent. With several live agents in one
// process (tests), the one published first answers.
#pragma once

#include <cstdint>

#include "topology/cluster_graph.h"

namespace railyard::topology {

class CablingAgent;

/// What LocalCablingGraph reports.
struct LocalGraph {
  uint64_t self = 0;     ///< this host's id in the graph (CablingAgent::HostId)
  bool settled = false;  ///< CablingAgent::Settled() at the time of the copy
  ClusterGraph graph;    ///< a copy of CablingAgent::Graph()
};

/// Called by CablingAgent (Start / destructor); thread-safe. Withdrawing an agent that
/// is not published is a no-op.
void PublishLocalAgent(const CablingAgent* agent);
void WithdrawLocalAgent(const CablingAgent* agent);

/// Copies the graph of this process's live agent into `*out`: false (and `*out`
/// untouched) when no agent runs in this process (fabric mode is off). When the agent
/// has not settled yet (CablingAgent::Settled: a few hello periods after it started),
/// waits for it up to `settleMs` (polling every 5 ms), then copies what it has
/// (`out->settled` says which). Thread-safe; an agent being destroyed meanwhile waits.
bool LocalCablingGraph(LocalGraph* out, int settleMs = 0);

}  // namespace railyard::topology
