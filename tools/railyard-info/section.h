// railyard-info: the section printer interface. Each part of the report ("rails",
// "skipped", and later "neighbours", "shape", "routes") is one SectionPrinter.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/cluster_graph.h"
#include "topology/discovery.h"
#include "topology/rail.h"

namespace railyard::info {

/// What every section sees: the discovery inputs and results, and the flags.
struct InfoContext {
  const topology::DiscoveryOptions& options;  ///< how the rails were discovered
  const std::vector<topology::Rail>& rails;    ///< DiscoverRails output, in its order
  const std::vector<std::string>& skipped;     ///< "<name>: <reason>" per skipped candidate
  bool verbose = false;                        ///< -v: include GID tables and details
  /// The cabling graph heard during --listen-ms (NULL when not listened: a fixture,
  /// no rails, or --listen-ms 0), and this host's id in it.
  const topology::ClusterGraph* graph = nullptr;
  /// How long the cabling protocol was listened to, ms (0 when not).
  int listenedMs = 0;
  uint64_t self = 0;
  /// When graph is NULL: why the cabling protocol was not listened to (e.g. "--listen-ms 0",
  /// "no fabric rail: lo: loopback ..."), printed after "Cabling: not listened".
  std::string notListened;
  /// The loopback interface (live machine, RAILYARD_SOCKET_IFNAME unset): never a cabling
  /// rail, but the TCP rail (127.0.0.1) of the expert and snapshot tiers
  /// (runtime::ProcessDomainOptions::loopbackWhenUnset). NULL when not shown.
  const topology::Rail* loopback = nullptr;
  /// True when the plugin's own TCP transport would use loopback too (no other interface
  /// qualifies, topology::SelectSocketDevices' automatic fallback).
  bool loopbackIsSocketDevice = false;
  /// RAILYARD_CLUSTER_KEY_FILE ("" = unset), and what loading it said: keyError is the
  /// ClusterKey::Load message when the file is missing, unreadable or not a key (empty
  /// when usable or unset); keyFingerprint its ClusterKey::Fingerprint when usable.
  std::string keyFile;
  std::string keyError;
  std::string keyFingerprint;
  /// What the plugin's init would choose here (live machine, environment valid; empty
  /// fabricSetting = not known: a fixture or a bad environment): RAILYARD_FABRIC and
  /// RAILYARD_COMMS as set, the fabric rails found (fabricRails), why none qualified
  /// (fabricWhyNone), and initError when the plugin's init would fail (no socket
  /// interface, RAILYARD_TRANSPORT=verbs without an RDMA port, RAILYARD_FABRIC=on
  /// without a rail, a rail selection error): its reason, without "init fails".
  std::string fabricSetting;
  std::string commsSetting;
  size_t fabricRails = 0;
  std::string fabricWhyNone;
  std::string initError;
  size_t rdmaPorts = 0;      ///< usable RDMA ports (RAILYARD_HCA; 0 with RAILYARD_TRANSPORT=tcp)
  std::string commsReason;   ///< runtime::CommsChoiceReason over the facts
  std::string commsName;     ///< runtime::CommsName over the facts: which comms, over which transport
  bool fabricComms = false;  ///< runtime::ChoosesFabricComms over the facts above
  /// Outside fabric mode: the interfaces the plugin's TCP transport would take as its
  /// devices (topology::SelectSocketDevices over RAILYARD_SOCKET_IFNAME), in order.
  std::vector<std::string> socketDevices;
};

/// One section of the report. Sections are printed in registration order (see
/// MakeSections in main.cc); in --json mode each one's ToJson() lands under the
/// top-level key name().
class SectionPrinter {
 public:
  virtual ~SectionPrinter() = default;
  /// Stable identifier: the JSON key, e.g. "rails".
  virtual std::string name() const = 0;
  /// Human-readable form, ending with a blank line.
  virtual void PrintText(const InfoContext& ctx, std::ostream& out) const = 0;
  /// Machine-readable form.
  virtual nlohmann::json ToJson(const InfoContext& ctx) const = 0;
};

}  // namespace railyard::info
