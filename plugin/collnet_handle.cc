// See collnet_handle.h.
#include "plugin/collnet_handle.h"

#include <cstring>
#include <string>

namespace railyard::plugin::collnet {
namespace {

constexpr uint8_t kMagic[4] = {'R', 'Y', 'C', 'L'};
constexpr size_t kHeader = 8;   // magic, version u16, address length u16
constexpr size_t kLocator = 8;  // host u32, flags u8, neighbours u8, rails u8, reserved u8
constexpr size_t kRailBytes = 5;
constexpr uint8_t kFlagNeighbours = 1, kFlagRails = 2;

void Put32(uint8_t* p, uint32_t v) { std::memcpy(p, &v, 4); }  // little-endian hosts only (as the ABI)
uint32_t Get32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

uint32_t HostDigest(uint64_t hostId) {
  const uint32_t d = static_cast<uint32_t>(hostId >> 32) ^ static_cast<uint32_t>(hostId);
  return d == 0 ? 1 : d;
}

Status CollnetHandle::Pack(uint8_t* out, bool* dropped) const {
  if (dropped) *dropped = false;
  if (host == 0) return InvalidArgument("collnet handle: host digest 0");
  if (neighbours.size() > 255 || rails.size() > 255) {
    return InvalidArgument("collnet handle: " + std::to_string(neighbours.size()) + " neighbours, " +
                           std::to_string(rails.size()) + " rails (at most 255 each)");
  }
  for (const HandleRail& r : rails) {
    if (r.prefix < 1 || r.prefix > 32) {
      return InvalidArgument("collnet handle: rail prefix length " + std::to_string(r.prefix));
    }
  }
  if (kHeader + address.size() + kLocator > kHandleBytes) {
    return InternalError("the Worker address (" + std::to_string(address.size()) + " bytes) does not fit NCCL's " +
                         std::to_string(kHandleBytes) + "-byte CollNet handle");
  }
  std::memset(out, 0, kHandleBytes);
  std::memcpy(out, kMagic, 4);
  out[4] = kVersion & 0xff;
  out[5] = kVersion >> 8;
  out[6] = static_cast<uint8_t>(address.size() & 0xff);
  out[7] = static_cast<uint8_t>(address.size() >> 8);
  if (!address.empty()) std::memcpy(out + kHeader, address.data(), address.size());
  uint8_t* loc = out + kHeader + address.size();
  size_t at = kHeader + address.size() + kLocator;
  Put32(loc, host);
  uint8_t flags = 0;
  if (hasNeighbours) {
    if (at + 4 * neighbours.size() <= kHandleBytes) {
      flags |= kFlagNeighbours;
      loc[5] = static_cast<uint8_t>(neighbours.size());
      for (uint32_t n : neighbours) {
        Put32(out + at, n);
        at += 4;
      }
    } else if (dropped) {
      *dropped = true;
    }
  }
  if (hasRails) {
    if (at + kRailBytes * rails.size() <= kHandleBytes) {
      flags |= kFlagRails;
      loc[6] = static_cast<uint8_t>(rails.size());
      for (const HandleRail& r : rails) {
        Put32(out + at, r.ipv4);
        out[at + 4] = r.prefix;
        at += kRailBytes;
      }
    } else if (dropped) {
      *dropped = true;
    }
  }
  loc[4] = flags;
  return Status::Ok();
}

Status CollnetHandle::Unpack(std::span<const uint8_t> bytes, CollnetHandle* out) {
  if (bytes.size() < kHeader || std::memcmp(bytes.data(), kMagic, 4) != 0) {
    return InvalidArgument("not a Railyard CollNet handle (no RYCL magic)");
  }
  const uint8_t* h = bytes.data();
  const unsigned version = h[4] | h[5] << 8;
  if (version != kVersion) {
    return InvalidArgument("CollNet handle version " + std::to_string(version) + ", this plugin speaks " +
                           std::to_string(kVersion) + " (every rank must load the same Railyard)");
  }
  const size_t len = h[6] | h[7] << 8;
  if (bytes.size() > kHandleBytes || kHeader + len + kLocator > bytes.size()) {
    return InvalidArgument("CollNet handle claims " + std::to_string(len) + " address bytes in " +
                           std::to_string(bytes.size()));
  }
  CollnetHandle r;
  r.address.assign(h + kHeader, h + kHeader + len);
  const uint8_t* loc = h + kHeader + len;
  r.host = Get32(loc);
  const uint8_t flags = loc[4], nn = loc[5], nr = loc[6];
  if (r.host == 0) return InvalidArgument("CollNet handle: host digest 0");
  if (loc[7] != 0 || (flags & ~(kFlagNeighbours | kFlagRails)) != 0) {
    return InvalidArgument("CollNet handle: reserved bits set (flags 0x" + std::to_string(flags) + ")");
  }
  if ((!(flags & kFlagNeighbours) && nn) || (!(flags & kFlagRails) && nr)) {
    return InvalidArgument("CollNet handle: a list count without its flag");
  }
  size_t at = kHeader + len + kLocator;
  if (at + 4 * size_t{nn} + kRailBytes * size_t{nr} > bytes.size()) {
    return InvalidArgument("CollNet handle: " + std::to_string(nn) + " neighbours and " + std::to_string(nr) +
                           " rails overrun the handle");
  }
  r.hasNeighbours = flags & kFlagNeighbours;
  for (unsigned i = 0; i < nn; ++i, at += 4) {
    const uint32_t d = Get32(h + at);
    if (d == 0 || d == r.host || (!r.neighbours.empty() && d <= r.neighbours.back())) {
      return InvalidArgument("CollNet handle: neighbour " + std::to_string(i) +
                             " is 0, the host itself or out of order");
    }
    r.neighbours.push_back(d);
  }
  r.hasRails = flags & kFlagRails;
  for (unsigned i = 0; i < nr; ++i, at += kRailBytes) {
    HandleRail rail{Get32(h + at), h[at + 4]};
    if (rail.prefix < 1 || rail.prefix > 32) {
      return InvalidArgument("CollNet handle: rail " + std::to_string(i) + " prefix length " +
                             std::to_string(rail.prefix));
    }
    r.rails.push_back(rail);
  }
  *out = std::move(r);
  return Status::Ok();
}

}  // namespace railyard::plugin::collnet
