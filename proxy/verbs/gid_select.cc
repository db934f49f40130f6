// GID selection; see gid_select.h.
#include "proxy/verbs/gid_select.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <string>
#include <system_error>
#include <tuple>

#include "topology/discovery.h"

namespace railyard::proxy::verbs {
namespace {

using Raw = std::array<std::uint8_t, 16>;

bool IsZero(const Raw& raw) {
  return std::all_of(raw.begin(), raw.end(), [](std::uint8_t b) { return b == 0; });
}

// ::ffff:0:0/96 (RFC 4291 2.5.5.2).
bool IsV4Mapped(const Raw& raw) {
  for (int i = 0; i < 10; ++i) {
    if (raw[i] != 0) return false;
  }
  return raw[10] == 0xff && raw[11] == 0xff;
}

// fe80::/10.
bool IsLinkLocal(const Raw& raw) { return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80; }

// A hole: all zeros, or "fe80::" with nothing after the prefix (NCCL's configuredGid()
// treats both as unconfigured entries).
bool IsHole(const Raw& raw) {
  if (IsZero(raw)) return true;
  if (raw[0] != 0xfe || raw[1] != 0x80) return false;
  return std::all_of(raw.begin() + 4, raw.end(), [](std::uint8_t b) { return b == 0; });
}

int FamilyOf(const Raw& raw) { return IsV4Mapped(raw) ? AF_INET : AF_INET6; }

std::string IpText(const Raw& raw) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (IsV4Mapped(raw)) {
    inet_ntop(AF_INET, raw.data() + 12, buf, sizeof(buf));
  } else {
    in6_addr a6{};
    std::memcpy(&a6, raw.data(), 16);
    inet_ntop(AF_INET6, &a6, buf, sizeof(buf));
  }
  return buf;
}

// "IPv4 10.0.0.1", "IPv6 fd00:2::1", "link-local fe80::1".
std::string AddrWords(const Raw& raw) {
  if (IsLinkLocal(raw)) return "link-local " + IpText(raw);
  return std::string(IsV4Mapped(raw) ? "IPv4 " : "IPv6 ") + IpText(raw);
}

const char* FamilyName(int family) { return family == AF_INET ? "IPv4" : "IPv6"; }

// The first `bits` bits of a and b are equal.
bool PrefixEqual(const std::uint8_t* a, const std::uint8_t* b, int bits) {
  int full = bits / 8;
  if (std::memcmp(a, b, static_cast<std::size_t>(full)) != 0) return false;
  int rest = bits % 8;
  if (rest == 0) return true;
  auto mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

// The peer's address in GID form (IPv4 as ::ffff:a.b.c.d) with its prefix in bits of
// the address proper (0..32 for IPv4, 0..128 for IPv6).
struct Peer {
  Raw raw{};
  int family = AF_INET;
  int bits = 32;
  std::string text;
};

bool ParsePeer(const PeerAddress& in, Peer* out) {
  Raw raw{};
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, in.ip.c_str(), &a4) == 1) {
    raw[10] = raw[11] = 0xff;
    std::memcpy(raw.data() + 12, &a4, 4);
  } else if (inet_pton(AF_INET6, in.ip.c_str(), &a6) == 1) {
    std::memcpy(raw.data(), &a6, 16);
  } else if (!topology::ParseGidText(in.ip, &raw)) {
    return false;
  }
  out->raw = raw;
  out->family = FamilyOf(raw);
  const int maxBits = out->family == AF_INET ? 32 : 128;
  out->bits = in.prefixLen < 0 || in.prefixLen > maxBits ? maxBits : in.prefixLen;
  out->text = IpText(raw);
  return true;
}

// `gid` is in the peer's subnet (same family, first peer.bits bits equal).
bool InPeerSubnet(const Peer& peer, const Raw& raw) {
  if (FamilyOf(raw) != peer.family) return false;
  if (peer.family == AF_INET) return PrefixEqual(raw.data() + 12, peer.raw.data() + 12, peer.bits);
  return PrefixEqual(raw.data(), peer.raw.data(), peer.bits);
}

// Table entries with their bytes taken from raw (tests may leave the derived
// fields of topology::Gid empty), holes dropped.
struct Entry {
  const topology::Gid* gid;
  GidType type;
  bool linkLocal;
  int family;
};

std::string DescribeGid(const Entry& e) {
  std::string s = "GID " + std::to_string(e.gid->index) + " (";
  s += e.type == GidType::kUnknown ? "type unreadable" : GidTypeName(e.type);
  s += ", " + AddrWords(e.gid->raw) + ")";
  return s;
}

int Version(GidType t) {
  switch (t) {
    case GidType::kRoceV2: return 2;
    case GidType::kRoceV1:
    case GidType::kIb: return 1;
    case GidType::kUnknown: break;
  }
  return -1;
}

// "link-local and IPv6": the kinds of entry present in `entries`.
std::string Kinds(const std::vector<Entry>& entries) {
  bool ll = false, v4 = false, v6 = false;
  for (const Entry& e : entries) {
    if (e.linkLocal) {
      ll = true;
    } else if (e.family == AF_INET) {
      v4 = true;
    } else {
      v6 = true;
    }
  }
  std::vector<const char*> kinds;
  if (ll) kinds.push_back("link-local");
  if (v4) kinds.push_back("IPv4");
  if (v6) kinds.push_back("IPv6");
  std::string s = kinds.size() < 3 ? "only " : "";
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    if (i > 0) s += i + 1 == kinds.size() ? " and " : ", ";
    s += kinds[i];
  }
  return s + " GIDs";
}

GidChoice GidFail(std::string error) {
  GidChoice c;
  c.error = std::move(error);
  return c;
}

GidChoice Choose(const Entry& e, std::string why) {
  GidChoice c;
  c.index = e.gid->index;
  c.gid = *e.gid;
  c.type = e.type;
  c.reason = DescribeGid(e) + ": " + why;
  return c;
}

}  // namespace

GidType ParseGidType(std::string_view text) {
  if (text.starts_with("RoCE v2")) return GidType::kRoceV2;
  if (text.starts_with("IB/RoCE v1") || text.starts_with("RoCE v1")) return GidType::kRoceV1;
  if (text == "IB" || text == "IB\n") return GidType::kIb;
  return GidType::kUnknown;
}

const char* GidTypeName(GidType type) {
  switch (type) {
    case GidType::kRoceV2: return "RoCE v2";
    case GidType::kRoceV1: return "RoCE v1";
    case GidType::kIb: return "IB";
    case GidType::kUnknown: break;
  }
  return "unknown type";
}

std::optional<Cidr> ParseCidr(std::string_view text) {
  const std::size_t slash = text.find('/');
  if (slash == std::string_view::npos || slash == 0) return std::nullopt;
  const std::string addr(text.substr(0, slash));
  const std::string_view bitsText = text.substr(slash + 1);
  if (bitsText.empty() || bitsText.size() > 3 ||
      !std::all_of(bitsText.begin(), bitsText.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
    return std::nullopt;
  }
  int bits = 0;
  auto [ptr, ec] = std::from_chars(bitsText.data(), bitsText.data() + bitsText.size(), bits);
  if (ec != std::errc() || ptr != bitsText.data() + bitsText.size()) return std::nullopt;
  Cidr c;
  c.text = std::string(text);
  c.prefixLen = bits;
  in_addr a4{};
  in6_addr a6{};
  if (inet_pton(AF_INET, addr.c_str(), &a4) == 1) {
    if (bits > 32) return std::nullopt;
    c.family = AF_INET;
    std::memcpy(c.addr.data(), &a4, 4);
  } else if (inet_pton(AF_INET6, addr.c_str(), &a6) == 1) {
    if (bits > 128) return std::nullopt;
    c.family = AF_INET6;
    std::memcpy(c.addr.data(), &a6, 16);
  } else {
    return std::nullopt;
  }
  return c;
}

bool CidrContains(const Cidr& range, const topology::Gid& gid) {
  const bool mapped = IsV4Mapped(gid.raw);
  if (range.family == AF_INET) {
    return mapped && PrefixEqual(gid.raw.data() + 12, range.addr.data(), range.prefixLen);
  }
  return !mapped && PrefixEqual(gid.raw.data(), range.addr.data(), range.prefixLen);
}

GidChoice ChooseGid(const std::vector<topology::Gid>& table, const GidPolicy& policy,
                    const PeerAddress* peerIn) {
  std::optional<Peer> peer;
  if (peerIn != nullptr) {
    Peer p;
    if (!ParsePeer(*peerIn, &p)) {
      return GidFail("peer address '" + peerIn->ip + "' is not an IPv4 or IPv6 address or a GID");
    }
    peer = p;
  }

  std::vector<Entry> entries;
  int maxIndex = -1;
  for (const topology::Gid& g : table) {
    maxIndex = std::max(maxIndex, g.index);
    if (IsHole(g.raw)) continue;
    entries.push_back({&g, ParseGidType(g.type), IsLinkLocal(g.raw), FamilyOf(g.raw)});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.gid->index < b.gid->index; });

  // --- forced index -----------------------------------------------------------------
  if (policy.forcedIndex >= 0) {
    const std::string name = "RAILYARD_GID_INDEX=" + std::to_string(policy.forcedIndex);
    auto it = std::find_if(entries.begin(), entries.end(),
                           [&](const Entry& e) { return e.gid->index == policy.forcedIndex; });
    if (it == entries.end()) {
      if (policy.forcedIndex > maxIndex) {
        return GidFail(name + ": GID index " + std::to_string(policy.forcedIndex) +
                    " is out of range (" +
                    (maxIndex < 0 ? std::string("the GID table is empty")
                                  : "the GID table's last entry is index " + std::to_string(maxIndex)) +
                    ")");
      }
      return GidFail(name + ": GID index " + std::to_string(policy.forcedIndex) +
                  " is a hole in the GID table (all-zero GID, no address behind it)");
    }
    GidChoice c = Choose(*it, "forced by " + name + " (no auto-selection, as NCCL_IB_GID_INDEX)");
    if (it->type == GidType::kUnknown) {
      c.reason += "; its type is unreadable, so its RoCE version is unknown";
    }
    if (peer) {
      if (it->linkLocal && !(IsLinkLocal(peer->raw) && peer->family == AF_INET6)) {
        bool sameSubnet = std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
          return !e.linkLocal && InPeerSubnet(*peer, e.gid->raw);
        });
        if (!sameSubnet) {
          c.warning = name + " is a link-local GID but peer " + peer->text +
                      " is on another subnet; the connection will probably fail";
        }
      } else if (!it->linkLocal && it->family != peer->family) {
        c.warning = name + " is an " + FamilyName(it->family) + " GID but peer " + peer->text +
                    " is " + FamilyName(peer->family) + "; the connection will probably fail";
      }
    }
    return c;
  }

  // --- automatic --------------------------------------------------------------------
  std::optional<Cidr> range;
  if (!policy.addrRange.empty()) {
    range = ParseCidr(policy.addrRange);
    if (!range) {
      return GidFail("RAILYARD_ADDR_RANGE='" + policy.addrRange +
                  "' is not a CIDR such as 10.0.0.0/16 or fd00::/8");
    }
    if (range->family != policy.addrFamily) {
      return GidFail(std::string("RAILYARD_ADDR_RANGE=") + policy.addrRange + " is " +
                  FamilyName(range->family) + " but RAILYARD_ADDR_FAMILY is " +
                  (policy.addrFamily == AF_INET ? "AF_INET" : "AF_INET6"));
    }
  }
  if (entries.empty()) {
    return GidFail("no usable GID: the GID table is empty (every entry is a hole)");
  }

  // Is the peer reachable through a link-local GID? Only on this link/subnet.
  bool peerNear = true;
  if (peer) {
    peerNear = (peer->family == AF_INET6 && IsLinkLocal(peer->raw)) ||
               std::any_of(entries.begin(), entries.end(), [&](const Entry& e) {
                 return !e.linkLocal && InPeerSubnet(*peer, e.gid->raw);
               });
  }

  int rangeRejected = 0, linkLocalRejected = 0, familyRejected = 0;
  std::vector<Entry> candidates;
  for (const Entry& e : entries) {
    if (range && !CidrContains(*range, *e.gid)) {
      ++rangeRejected;
    } else if (e.linkLocal && !peerNear) {
      ++linkLocalRejected;
    } else if (peer && !e.linkLocal && e.family != peer->family) {
      ++familyRejected;
    } else {
      candidates.push_back(e);
    }
  }

  if (candidates.empty()) {
    std::string msg = "no usable GID: " + Kinds(entries);
    std::vector<std::string> clauses;
    if (rangeRejected > 0) {
      clauses.push_back(
          (rangeRejected == static_cast<int>(entries.size()) ? std::string("none")
                                                              : std::to_string(rangeRejected)) +
          " inside RAILYARD_ADDR_RANGE=" + policy.addrRange);
    }
    if (peer && (linkLocalRejected > 0 || familyRejected > 0)) {
      std::string p = "peer " + peer->text;
      if (linkLocalRejected > 0) p += " is on another subnet";
      if (familyRejected > 0) {
        p += std::string(linkLocalRejected > 0 ? " and" : "") + " is " + FamilyName(peer->family);
      }
      std::vector<std::string> why;
      if (familyRejected > 0) {
        why.push_back(std::string("an ") + FamilyName(peer->family == AF_INET ? AF_INET6 : AF_INET) +
                      " GID cannot reach it");
      }
      if (linkLocalRejected > 0) why.push_back("a link-local GID reaches only the local link");
      p += " (";
      for (std::size_t i = 0; i < why.size(); ++i) p += (i > 0 ? "; " : "") + why[i];
      p += ")";
      clauses.push_back(p);
    }
    for (const std::string& c : clauses) msg += ", " + c;
    return GidFail(msg);
  }

  const int wanted = policy.addrFamily == AF_INET6 ? AF_INET6 : AF_INET;
  auto tierOf = [&](const Entry& e) {
    int typeRank = 2;  // unreadable
    if (Version(e.type) == policy.roceVersion) {
      typeRank = 0;
    } else if (e.type != GidType::kUnknown) {
      typeRank = 1;
    }
    if (e.linkLocal) return 7 + typeRank;       // 7..9
    if (e.family == wanted) return 1 + typeRank;  // 1..3
    return 4 + typeRank;                          // 4..6
  };
  auto key = [&](const Entry& e) {
    const bool near = peer && !e.linkLocal && InPeerSubnet(*peer, e.gid->raw);
    return std::make_tuple(tierOf(e), near ? 0 : 1, e.gid->index);
  };
  const Entry& best = *std::min_element(candidates.begin(), candidates.end(),
                                        [&](const Entry& a, const Entry& b) { return key(a) < key(b); });
  const int tier = tierOf(best);

  const std::string fam = policy.addrFamily == AF_INET6 ? "IPv6" : "IPv4-mapped";
  const std::string ver = "RoCE v" + std::to_string(policy.roceVersion);
  std::string why;
  switch (tier) {
    case 1:
      why = "lowest-index " + ver + " GID with an " + fam + " address";
      break;
    case 2:
      why = "no " + ver + " GID with an " + fam + " address; lowest-index " + fam +
            " GID of another type";
      break;
    case 3:
      why = "no " + fam + " GID with a readable type; gid_attrs/types/" +
            std::to_string(best.gid->index) + " could not be read, so its RoCE version is unknown";
      break;
    case 4:
    case 5:
    case 6:
      why = "no usable " + fam + " GID (table has " + Kinds(entries) + "); using an " +
            FamilyName(best.family) + " GID";
      if (tier == 6) {
        why += " whose type is unreadable (gid_attrs/types/" + std::to_string(best.gid->index) +
               "), so its RoCE version is unknown";
      }
      why += " (NCCL 2.28.9 would fall back to GID index 0)";
      break;
    default:
      why = "only link-local GIDs are usable; a link-local GID reaches only peers on the same link";
      if (!peer) why += " (no peer address known yet)";
      if (tier == 9) {
        why += "; its type is unreadable (gid_attrs/types/" + std::to_string(best.gid->index) +
               "), so its RoCE version is unknown";
      }
      break;
  }
  if (range) why += ", inside RAILYARD_ADDR_RANGE=" + policy.addrRange;
  if (peer && !best.linkLocal && InPeerSubnet(*peer, best.gid->raw)) {
    why += ", in the subnet of peer " + peer->text + "/" + std::to_string(peer->bits);
  }
  return Choose(best, why);
}

bool GidStillValid(const GidChoice& choice, const std::vector<topology::Gid>& table) {
  if (!choice.ok() || choice.index < 0) return false;
  return std::any_of(table.begin(), table.end(), [&](const topology::Gid& g) {
    return g.index == choice.index && g.raw == choice.gid.raw && !IsHole(g.raw);
  });
}

}  // namespace railyard::proxy::verbs
