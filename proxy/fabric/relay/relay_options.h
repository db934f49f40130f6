// Settings of relayed Endpoints and of the Forwarder that relays them.
#pragma once

#include <cstdint>
#include <memory>

#include "env/config.h"
#include "env/status.h"
#include "proxy/fabric/relay/relay_wire.h"
#include "topology/cluster_key.h"

namespace railyard::fabric::relay {

/// Sizes, limits and trust of relayed routes (the same on sources and relays).
struct RelayOptions {
  /// Slots of the relay's ring per route (chunks in flight from the source), 1..4096.
  uint32_t slots = 8;
  /// Bytes per slot: a 256-byte header area, then up to slotBytes - 256 bytes of one
  /// chunk. Must hold the largest Send record plus the header area (65,536 + 256).
  uint64_t slotBytes = 512 * 1024;
  /// Slots of the source's return ring (Read data coming back), 1..4096.
  uint32_t returnSlots = 4;
  /// RAILYARD_TIMEOUT_MS. At the relay: its legs' own timeout. At the source: a route
  /// with work outstanding and nothing heard from the relay for twice this long
  /// fails with TIMEOUT (the relay's legs report first when only the far side stalls).
  int timeoutMs = 30000;
  /// RAILYARD_RELAY_MAX_PER_PEER: routes one upstream Worker may hold open at a relay.
  int maxRoutesPerPeer = 1024;
  /// RAILYARD_RELAY_IDLE_MS: a route with nothing outstanding and no traffic for this
  /// long is closed by the relay (its source sees a named error on its next op).
  int idleMs = 10000;
  /// This process's rank, named in errors (-1: unknown).
  int rank = -1;
  /// RAILYARD_CLUSTER_KEY_FILE: route opens carry and must carry its MAC. nullptr = none.
  std::shared_ptr<const topology::ClusterKey> clusterKey;

  /// Timeout and relay limits from `config`; sizes at their defaults.
  static RelayOptions FromConfig(const env::Config& config);
  /// InvalidArgument naming the first field out of range.
  Status Validate() const;
  /// Payload bytes of one slot.
  uint64_t PayloadBytes() const { return slotBytes - kSlotPayloadOffset; }
};

}  // namespace railyard::fabric::relay
