// CommsChoice: which NCCL comms the plugin's init takes, as a pure rule over the facts
// init found (runtime::detail::UsesFabricComms applies it to the NetRuntime's state;
// railyard-info applies it to what it discovers, so both say the same).
#pragma once

#include <string>

namespace railyard::runtime {

/// What the choice depends on: RAILYARD_COMMS as set ("auto", "fabric", "legacy"),
/// fabric mode (rails found, RAILYARD_FABRIC not off), verbs mode (RDMA ports opened
/// outside fabric mode), whether this host has any usable RDMA port (on a rail or
/// not), and whether every plain-TCP device is IPv4 (and there is one).
struct CommsFacts {
  std::string comms = "auto";
  bool fabricMode = false;
  bool verbsMode = false;
  bool rdma = false;
  bool ipv4Devices = false;
};

/// True: the comms written once over the fabric (proxy/nccl/); false: the older
/// per-transport comms (proxy/tcp, proxy/verbs). The fabric comms serve plain TCP
/// mode on IPv4 devices, verbs mode and fabric mode over TCP rails; fabric mode on a
/// host with RDMA ports only with comms "fabric" (they pass every soft-RoCE ring test
/// there but ran at 0.46-0.81 of the older comms' speed: docs/benchmarks.md, "Fabric
/// mode over RDMA: the fabric comms pass, and are slower"); never IPv6 devices in
/// plain TCP mode (the fabric's TCP transport binds IPv4). "legacy": never.
bool ChoosesFabricComms(const CommsFacts& f);

/// Why ChoosesFabricComms(f) chose what it did, one clause for a log line or a report:
/// e.g. "fabric mode over TCP rails", "RAILYARD_COMMS=legacy", "fabric mode on a host
/// with RDMA ports: auto keeps the older comms (slower over RDMA ...)". Same facts, same text.
std::string CommsChoiceReason(const CommsFacts& f);

/// The comms ChoosesFabricComms(f) takes, named for a log line or a report, with the
/// transport they run over: "the fabric-interface comms (proxy/nccl) over the cabled
/// fabric (fabric mode)", "... over the fabric's TCP transport alone (no fabric mode)",
/// "... over the fabric's verbs transport alone (no fabric mode)", or "the older
/// per-transport comms (proxy/tcp, proxy/verbs)". (A trial read "the comms over the
/// fabric" beside "Mode: plain TCP: no fabric rail" as a contradiction.)
std::string CommsName(const CommsFacts& f);

/// True where RAILYARD_COMMS=fabric was set and the rule still takes the older comms
/// (plain TCP mode with a non-IPv4 device): init says so at WARN, never silently.
bool FabricCommsRefused(const CommsFacts& f);

}  // namespace railyard::runtime
