// GID selection for the verbs (RoCE) transport: a pure function over one port's
// GID table, made per device at connect time.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/rail.h"

namespace railyard::proxy::verbs {

/// The type of a GID table entry, from <sysfs>/class/infiniband/<dev>/ports/<p>/gid_attrs/types/<i>
/// (Documentation/ABI/stable/sysfs-class-infiniband; the kernel writes "IB/RoCE v1"
/// or "RoCE v2"; topology::Gid::type already maps "IB/RoCE v1" to "IB" or "RoCE v1").
enum class GidType {
  kUnknown,  ///< the types file could not be read (EINVAL in some containers) or held something else
  kIb,       ///< "IB": an InfiniBand port (counts as RoCE version 1 for the version preference)
  kRoceV1,   ///< "RoCE v1" (or the raw "IB/RoCE v1"): Ethernet L2 only, not routable
  kRoceV2,   ///< "RoCE v2": RoCE over UDP/IP (port 4791), routable
};

/// Maps topology::Gid::type text to a GidType: "RoCE v2" -> kRoceV2; "RoCE v1" and
/// "IB/RoCE v1" -> kRoceV1; "IB" -> kIb; anything else, "" included, -> kUnknown.
/// Like NCCL 2.28.9 (net_ib.cc ncclIbRoceGetVersionNum), only the leading text counts,
/// so a trailing newline is harmless.
GidType ParseGidType(std::string_view text);

/// "RoCE v2", "RoCE v1", "IB" or "unknown type".
const char* GidTypeName(GidType type);

/// An address range, as NCCL_IB_ADDR_RANGE / RAILYARD_ADDR_RANGE spell it: "10.0.0.0/16",
/// "fd00::/8". Bits past `prefixLen` in the address are ignored when matching.
struct Cidr {
  int family = AF_INET;                ///< AF_INET or AF_INET6
  std::array<std::uint8_t, 16> addr{};  ///< network order; IPv4 uses the first 4 bytes
  int prefixLen = 0;                   ///< 0..32 (IPv4) or 0..128 (IPv6)
  std::string text;                    ///< as given
};

/// Parses "<address>/<bits>": a numeric IPv4 or IPv6 address (inet_pton), '/', and
/// decimal bits within 0..32 (IPv4) or 0..128 (IPv6). nullopt for anything else
/// (a missing '/', a host name, a bad or too-large prefix, whitespace).
/// NCCL 2.28.9 (net_ib.cc envIbAddrRange) instead ignores a malformed range with an
/// INFO line; Railyard rejects it when the variable is parsed (env/variables.cc).
std::optional<Cidr> ParseCidr(std::string_view text);

/// True when GID `gid` carries an address inside `range`: an IPv4 range matches only
/// IPv4-mapped GIDs (::ffff:a.b.c.d, RFC 4291 2.5.5.2), compared on the last 4 bytes;
/// an IPv6 range matches only GIDs that are not IPv4-mapped, compared on all 16 bytes.
/// Link-local GIDs are matched like any IPv6 address (fe80::/10 contains them).
bool CidrContains(const Cidr& range, const topology::Gid& gid);

/// The selection policy, from the configuration (env::Config).
struct GidPolicy {
  /// RAILYARD_GID_INDEX (alias NCCL_IB_GID_INDEX): >= 0 pins the index and skips
  /// auto-selection (as NCCL 2.28.9 does on RoCE); -1 = automatic.
  int forcedIndex = -1;
  /// RAILYARD_ROCE_VERSION (alias NCCL_IB_ROCE_VERSION_NUM): the preferred RoCE version, 1 or 2.
  int roceVersion = 2;
  /// RAILYARD_ADDR_FAMILY (alias NCCL_IB_ADDR_FAMILY): AF_INET prefers IPv4-mapped GIDs,
  /// AF_INET6 prefers native IPv6 ones.
  int addrFamily = AF_INET;
  /// RAILYARD_ADDR_RANGE (alias NCCL_IB_ADDR_RANGE): "" = any; otherwise a CIDR
  /// (ParseCidr) that the chosen GID must fall in. Its family must equal addrFamily.
  std::string addrRange;
};

/// What is known about the remote end when choosing (optional).
struct PeerAddress {
  /// The peer's address on this rail: dotted IPv4 ("10.0.1.2"), IPv6 text
  /// ("fd00:2::2", "fe80::1"), or a GID as sysfs prints it (8 groups of 4 hex
  /// digits; an IPv4-mapped GID counts as its IPv4 address).
  std::string ip;
  /// The prefix length (netmask bits) of the peer's subnet; -1 = a host route (/32, /128).
  int prefixLen = -1;
};

/// The outcome of ChooseGid.
struct GidChoice {
  int index = -1;          ///< the chosen GID table index (the sgid_index of the QP); -1 on error
  topology::Gid gid;       ///< the chosen entry (default-constructed on error)
  GidType type = GidType::kUnknown;
  /// Why this entry, for INFO logs: e.g. "GID 3 (RoCE v2, IPv4 10.0.0.1): lowest-index
  /// RoCE v2 GID with an IPv4-mapped address".
  std::string reason;
  /// Set with a choice that will probably not work (a forced link-local GID for a peer
  /// on another subnet, a forced GID of the wrong family); callers log it at WARN.
  std::string warning;
  /// Set when no GID is usable (index is then -1): says why, e.g.
  /// "no usable GID: only link-local and IPv6 GIDs, peer 10.0.1.2 is on another subnet".
  std::string error;

  bool ok() const { return error.empty(); }
};

/// Chooses the source GID of a RoCE QP from one port's GID table. Pure: no I/O, no
/// logging. Call it per device at connect/accept time (as NCCL 2.28.9 does in
/// ncclIbGetGidIndex), with the table just read from sysfs; on IBV_EVENT_GID_CHANGE
/// re-read the table and call it again for new connections (see GidStillValid).
/// GID indexes differ between hosts (the IPv4 RoCE v2 entry is 3 on one ConnectX host
/// and 4 on another), so the index is never assumed to be the same on both ends:
/// each side chooses its own and sends the GID bytes to the peer.
///
/// `table`: topology::Rail::gids — entries by index; holes (all-zero GIDs) may be absent
/// or present with zero bytes, and are never chosen; an unreadable type is "".
///
/// Forced (policy.forcedIndex >= 0): that entry, whatever its type or address; an error
/// naming the index when it is past the end of the table or a hole. A warning is set
/// when a peer is given and the entry is link-local while the peer is on another subnet,
/// or its family differs from the peer's.
///
/// Automatic: the candidates are the non-hole entries inside policy.addrRange (when
/// set). With a peer, entries of the other address family than the peer's are
/// excluded (an IPv6 source cannot reach an IPv4-mapped destination), and link-local
/// (fe80::/10) entries are excluded unless the peer is on this subnet (its address is
/// link-local, or inside the peer's prefix around one of this table's addresses).
/// Among the candidates, the first tier that is not empty wins:
///  1. family = addrFamily, not link-local, type = roceVersion
///     (default: RoCE v2 with an IPv4-mapped address);
///  2. family = addrFamily, not link-local, another known type (e.g. RoCE v1);
///  3. family = addrFamily, not link-local, type unreadable;
///  4-6. the same three for the other family (an IPv6-only table with the default
///     AF_INET policy picks its RoCE v2 IPv6 GID);
///  7. link-local, type = roceVersion, then other known types, then unreadable.
/// Within a tier, an entry inside the peer's subnet is preferred, then the lowest index.
/// Tier 1 is what NCCL 2.28.9's walk (net_ib.cc ncclIbGetGidIndex/ncclUpdateGidIndex)
/// ends on: the lowest in-range GID of the wanted family and RoCE version. Without
/// one, NCCL ends on the lowest in-range GID of the wanted family whatever its type
/// (an unreadable type included), else on index 0 — often a link-local RoCE v1 GID
/// that cannot reach a peer on another subnet. Railyard differs on purpose: a typed
/// entry beats an unreadable one (tier 2 before 3), and instead of index 0 it uses
/// tiers 4-7; `reason` says which tier applied and, for an unreadable type, that the
/// RoCE version is unknown.
/// Errors: policy.addrRange not a CIDR, or of the other family than policy.addrFamily;
/// an unparsable peer address; no candidate (the message lists what the table holds and
/// why each kind was rejected).
GidChoice ChooseGid(const std::vector<topology::Gid>& table, const GidPolicy& policy,
                    const PeerAddress* peer);

/// True when `table` (re-read after IBV_EVENT_GID_CHANGE) still holds choice.gid's
/// 16 bytes at choice.index. When false, QPs using that sgid_index must be
/// re-resolved (ChooseGid) before new connections, and existing ones will likely fail.
bool GidStillValid(const GidChoice& choice, const std::vector<topology::Gid>& table);

}  // namespace railyard::proxy::verbs
