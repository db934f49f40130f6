#include "proxy/relay/relay_policy.h"

#include <arpa/inet.h>
#include <ifaddrs.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/handle.h"
#include "topology/graph_json.h"

namespace railyard::proxy {

namespace {

/// "0a": two lower-case hex digits.
std::string HexByte(unsigned v) {
  static const char* kDigits = "0123456789abcdef";
  return {kDigits[(v >> 4) & 0xf], kDigits[v & 0xf]};
}

bool Contains(const std::vector<in_addr>& v, in_addr a) {
  return std::any_of(v.begin(), v.end(), [&](const in_addr& x) { return x.s_addr == a.s_addr; });
}

}  // namespace

Status CheckRelayRecord(const RelayRecord& rec, const RelayScope& scope) {
  // Every byte the connector sends is checked, not only those this relay uses: a bit
  // or byte with no meaning yet is refused, so a later version's record is not misread.
  if ((rec.flags & ~kRelayFlagMac) != 0) {
    return InvalidUsage("the record sets undefined flag bits (flags 0x" + HexByte(rec.flags) + ")");
  }
  if (rec.pad[0] != 0 || rec.pad[1] != 0) return InvalidUsage("the record's reserved bytes are not zero");
  const size_t nameLen = strnlen(rec.originName, sizeof rec.originName);
  if (nameLen == sizeof rec.originName) {
    return InvalidUsage("the record's origin name is not NUL-terminated within its " +
                        std::to_string(sizeof rec.originName) + " bytes");
  }
  for (size_t i = 0; i < nameLen; ++i) {
    const auto c = static_cast<unsigned char>(rec.originName[i]);
    if (c < 0x20 || c == 0x7f) {
      return InvalidUsage("the record's origin name holds control byte 0x" + HexByte(c) + " at " + std::to_string(i));
    }
  }
  for (size_t i = nameLen; i < sizeof rec.originName; ++i) {
    if (rec.originName[i] != '\0') return InvalidUsage("the record's origin name is not NUL-padded");
  }
  if (rec.destHost == scope.selfHost) {
    return InvalidUsage("the record names this relay's own host as destination (port " +
                        std::to_string(rec.destPort) + "): a relay never connects to its own host");
  }
  if (std::find(scope.graphHosts.begin(), scope.graphHosts.end(), rec.destHost) == scope.graphHosts.end()) {
    return InvalidUsage("destination host " + topology::HostIdText(rec.destHost) + " is not in the cabling graph");
  }
  if (rec.destPort == 0 || rec.destPort == scope.relayPort) {
    return InvalidUsage("destination port " + std::to_string(rec.destPort) + " is not a listener port");
  }
  if ((rec.destPort < scope.listenerPortLow || rec.destPort > scope.listenerPortHigh) &&
      std::find(scope.fixedListenerPorts.begin(), scope.fixedListenerPorts.end(), rec.destPort) ==
          scope.fixedListenerPorts.end()) {
    std::string fixed;
    for (uint16_t p : scope.fixedListenerPorts) fixed += ", " + std::to_string(p);
    return InvalidUsage("destination port " + std::to_string(rec.destPort) + " is outside " +
                        std::to_string(scope.listenerPortLow) + ".." + std::to_string(scope.listenerPortHigh) +
                        " (net.ipv4.ip_local_port_range), where Railyard's listeners bind" +
                        (fixed.empty() ? std::string() : " (nor a tier tunnel port" + fixed.substr(1) + ")") +
                        ": a relay connects to nothing else");
  }
  if (rec.hops >= kMaxRelayHops) {
    return InvalidUsage("the socket already crossed " + std::to_string(rec.hops) + " relays (at most " +
                        std::to_string(kMaxRelayHops) + ")");
  }
  return Status::Ok();
}

Status CheckRelayMac(const RelayRecord& rec, const unsigned char* mac, const topology::ClusterKey* key) {
  const bool carries = (rec.flags & kRelayFlagMac) != 0;
  if (key == nullptr) {
    if (carries) {
      return InvalidUsage("the record carries a MAC but this relay has no cluster key "
                          "(set RAILYARD_CLUSTER_KEY_FILE the same on every host)");
    }
    return Status::Ok();
  }
  if (!carries || mac == nullptr) {
    return InvalidUsage("the record carries no MAC and this relay requires one (RAILYARD_CLUSTER_KEY_FILE)");
  }
  if (!key->Verify(kRelayMacPurpose, &rec, sizeof rec, mac)) {
    return InvalidUsage("the record's MAC does not verify with this relay's cluster key " + key->Fingerprint() +
                        " (forged, or another key)");
  }
  return Status::Ok();
}

Status CheckFollowingHello(const RecordHeader& h) {
  // A fabric TCP socket (proxy/fabric/tcp) spliced through this relay opens with its
  // 64-byte frame header: magic "RYFB", then the wire version and the frame type as
  // bytes 4 and 5 (read here as the little-endian `version` field).
  if (h.magic == fabric::tcp::kFrameMagic) {
    const unsigned wire = h.version & 0xffu, type = h.version >> 8;
    if (wire != fabric::tcp::kWireVersion) {
      return InvalidUsage("the relay record is followed by a fabric frame of wire version " + std::to_string(wire) +
                          ", this relay speaks " + std::to_string(fabric::tcp::kWireVersion));
    }
    if (type != static_cast<unsigned>(fabric::tcp::FrameType::kHello)) {
      return InvalidUsage("the relay record is followed by fabric frame type " + std::to_string(type) +
                          ", not a hello");
    }
    return Status::Ok();
  }
  RY_RETURN_IF_ERROR(CheckHeader(h, "the record after the relay record"));
  if (h.kind != static_cast<uint16_t>(RecordKind::kHello)) {
    return InvalidUsage("the relay record is followed by record kind " + std::to_string(h.kind) +
                        ", not a hello");
  }
  return Status::Ok();
}

Status CheckOnwardLeg(const SocketTarget& t, uint16_t destPort, bool relayed, const RelayScope& scope) {
  if (t.remote.ss_family != AF_INET) return InvalidUsage("onward leg is not IPv4");
  const auto* r = reinterpret_cast<const sockaddr_in*>(&t.remote);
  const uint32_t host = ntohl(r->sin_addr.s_addr);
  const std::string where = SockaddrToString(t.remote);
  if ((host >> 24) == 127 || host == 0 || (host >> 28) == 0xe || host == 0xffffffffu ||
      (host >> 16) == 0xa9fe) {
    return InvalidUsage("onward address " + where + " is loopback, unspecified, multicast, broadcast or link-local");
  }
  if (Contains(scope.localAddresses, r->sin_addr) || Contains(scope.railAddresses, r->sin_addr)) {
    return InvalidUsage("onward address " + where + " belongs to this host");
  }
  const uint16_t want = relayed ? scope.relayPort : destPort;
  if (ntohs(r->sin_port) != want) {
    return InvalidUsage("onward port " + std::to_string(ntohs(r->sin_port)) + " is not the " +
                        (relayed ? "relay" : "listener") + " port " + std::to_string(want));
  }
  if (t.local.ss_family != AF_INET ||
      !Contains(scope.railAddresses, reinterpret_cast<const sockaddr_in*>(&t.local)->sin_addr)) {
    return InvalidUsage("onward leg to " + where + " does not leave from a rail of this host");
  }
  // Over that rail's cable: the far end lies in its subnet (hostile-peer probe: without
  // a cluster key, a forged record made a relay dial a host's management address).
  const in_addr from = reinterpret_cast<const sockaddr_in*>(&t.local)->sin_addr;
  for (size_t i = 0; i < scope.railAddresses.size() && i < scope.railPrefixLens.size(); ++i) {
    if (scope.railAddresses[i].s_addr != from.s_addr) continue;
    const int len = scope.railPrefixLens[i];
    if (!ArrivedFromTheCable(r->sin_addr, from, len, {})) {
      char rail[INET_ADDRSTRLEN] = "?";
      inet_ntop(AF_INET, &from, rail, sizeof rail);
      return InvalidUsage("onward address " + where + " is not on the cable of rail address " + rail + "/" +
                          std::to_string(len) + ": a relay's next leg goes over a cable");
    }
  }
  return Status::Ok();
}

void EphemeralPortRange(uint16_t* low, uint16_t* high) {
  *low = 32768;
  *high = 60999;
  std::FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  if (f == nullptr) return;
  unsigned a = 0, b = 0;
  if (std::fscanf(f, "%u %u", &a, &b) == 2 && a >= 1 && a <= b && b <= 65535) {
    *low = static_cast<uint16_t>(a);
    *high = static_cast<uint16_t>(b);
  }
  std::fclose(f);
}

std::vector<in_addr> LocalIpv4Addresses() {
  std::vector<in_addr> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET) continue;
    out.push_back(reinterpret_cast<const sockaddr_in*>(i->ifa_addr)->sin_addr);
  }
  freeifaddrs(list);
  return out;
}

bool ArrivedFromTheCable(in_addr source, in_addr rail, int prefixLen, const std::vector<in_addr>& ownRails) {
  if (source.s_addr == 0) return false;
  for (const in_addr& a : ownRails) {
    if (a.s_addr == source.s_addr) return false;
  }
  if (prefixLen <= 0 || prefixLen >= 32) return true;
  const uint32_t mask = htonl(~uint32_t{0} << (32 - prefixLen));
  return (source.s_addr & mask) == (rail.s_addr & mask);
}

}  // namespace railyard::proxy
