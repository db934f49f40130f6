// The one rule for the loopback interface ("lo") and rails, and its one wording, for
// every place that states it: rail discovery's skip reason (railyard-info's table),
// proxy::SelectFabricRails (the plugin's fabric mode, railyardd, the tiers' host:NAME
// peers), railyard-info's LO row and "no fabric rail" line, and railyardd's "no rail"
// error.
//
// The rule: loopback is never a fabric rail (the cabling agent, the fabric relay and the
// fabric comms never run on it: its packets never leave this host, so no cable can be
// found or carried there), whatever RAILYARD_SOCKET_IFNAME names. Rail discovery lists
// it only when a non-exclusive filter names it (a table row, never a cabling rail). The
// expert and snapshot tiers' TCP Domain uses it (127.0.0.1) while RAILYARD_SOCKET_IFNAME
// is unset.
#pragma once

#include <string>

namespace railyard::topology {

/// True when interface `ifname` is this host's loopback interface: its flags say
/// IFF_LOOPBACK (`iffLoopback`), or it is named "lo" (a fixture or a caller that has
/// no flags).
bool IsLoopbackInterface(const std::string& ifname, bool iffLoopback);

/// The rule in one sentence, without an interface name: "loopback, never a fabric rail
/// (its packets never leave this host), whatever RAILYARD_SOCKET_IFNAME names; the
/// tiers' TCP rail (127.0.0.1) while RAILYARD_SOCKET_IFNAME is unset".
const std::string& LoopbackRailRule();

/// The reason a loopback interface is not a rail, as skip lists give it:
/// "<ifname>: " + LoopbackRailRule().
std::string LoopbackSkipReason(const std::string& ifname);

/// True when `skipReason` (one entry of a skip list) is LoopbackSkipReason's, for any
/// interface name; `*ifname` (when given) gets that name.
bool IsLoopbackSkipReason(const std::string& skipReason, std::string* ifname = nullptr);

/// What a fabric rail is, for errors that found none: "an IPv4 interface, not loopback
/// (never a fabric rail), without a default route unless <filterSource> names it
/// exactly (=NAME); <filterSource> chooses". `filterSource` is where the filter came
/// from ("RAILYARD_SOCKET_IFNAME", "--ifname").
std::string FabricRailRequirement(const std::string& filterSource);

/// The plugin's init error for RAILYARD_FABRIC=on with no rail (railyard-info says the
/// same): "RAILYARD_FABRIC=on but no interface qualifies as a rail (<requirement>):
/// <whyNone, or 'none found'>".
std::string FabricOnWithoutRailText(const std::string& filterSource, const std::string& whyNone);

}  // namespace railyard::topology
