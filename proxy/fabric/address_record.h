// The byte layout Railyard's packed addresses share (tcp::WorkerAddress "RYWA" in
// proxy/fabric/tcp/tcp_frame.h, runtime::HostAddress "RYHA" in
// proxy/runtime/cable_set_domain.h): a 16-byte header {magic u32, version u16, rails
// u16, worker id u64}, then `perRailBytes` per rail, each starting {IPv4 u32 (network
// order), port u16, reserved u16 = 0}; what follows in a rail's slot is the format's own.
// Integers little-endian, as all of this wire (tcp_frame.cc asserts the host is).
// Header-only: both layers include it; neither links the other.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "env/status.h"

namespace railyard::fabric {

/// One address format: its magic, version, rail slot size and rail limit, and the
/// words its errors use.
struct AddressRecordFormat {
  uint32_t magic = 0;
  uint16_t version = 0;
  size_t perRailBytes = 8;  ///< >= 8: IPv4, port, reserved, then the format's own bytes
  size_t maxRails = 16;
  const char* what = "address";         ///< "worker address": the errors' subject
  std::string (*badMagic)(uint32_t) = nullptr;  ///< the error text for a foreign magic
  /// The u16 after a rail's port is the format's own, not reserved: the format's bytes
  /// start there (slot + 6) and are not checked here (runtime::HostAddress v2).
  bool ownsRailWord = false;
};

/// Header bytes before the first rail slot.
inline constexpr size_t kAddressRecordHeader = 16;

/// Packs `workerId` and `rails` (each with .ipv4 and .port); `extra(i, own)` writes the
/// format's own bytes of rail i's slot (from slot + 8, or slot + 6 with ownsRailWord;
/// zeroed before).
template <class Rail, class Extra>
std::vector<uint8_t> PackAddressRecord(const AddressRecordFormat& f, uint64_t workerId, const std::vector<Rail>& rails,
                                       Extra extra) {
  std::vector<uint8_t> out(kAddressRecordHeader + f.perRailBytes * rails.size());
  const uint16_t n = static_cast<uint16_t>(rails.size());
  std::memcpy(out.data(), &f.magic, 4);
  std::memcpy(out.data() + 4, &f.version, 2);
  std::memcpy(out.data() + 6, &n, 2);
  std::memcpy(out.data() + 8, &workerId, 8);
  for (size_t i = 0; i < rails.size(); ++i) {
    uint8_t* p = out.data() + kAddressRecordHeader + f.perRailBytes * i;
    std::memcpy(p, &rails[i].ipv4, 4);
    std::memcpy(p + 4, &rails[i].port, 2);
    extra(i, p + (f.ownsRailWord ? 6 : 8));
  }
  return out;
}

/// Validates `b` (peer data) against `f`: exact size, magic, version, 1..maxRails rails,
/// non-zero worker id; per rail a usable IPv4 (not 0, not 255.255.255.255), a non-zero
/// port, zero reserved bytes (unless ownsRailWord). Calls `onRail(i, ipv4, port, own)`
/// for each rail in order (own: slot + 8, or slot + 6 with ownsRailWord) (its Status ends the unpacking when not Ok). InvalidArgument naming the fault
/// ("<what> rail 2 has port 0"); *workerId is written only when everything is valid.
template <class OnRail>
Status UnpackAddressRecord(const AddressRecordFormat& f, std::span<const uint8_t> b, uint64_t* workerId,
                           OnRail onRail) {
  const std::string what = f.what;
  if (b.size() < kAddressRecordHeader) return InvalidArgument(what + " of " + std::to_string(b.size()) + " bytes");
  uint32_t magic;
  uint16_t version, n;
  std::memcpy(&magic, b.data(), 4);
  std::memcpy(&version, b.data() + 4, 2);
  std::memcpy(&n, b.data() + 6, 2);
  if (magic != f.magic) return InvalidArgument(f.badMagic != nullptr ? f.badMagic(magic) : "not a Railyard " + what);
  if (version != f.version) {
    return InvalidArgument(what + " version " + std::to_string(version) + ", this build speaks " +
                           std::to_string(f.version));
  }
  if (n == 0 || n > f.maxRails) {
    return InvalidArgument(what + " with " + std::to_string(n) + " rails (1.." + std::to_string(f.maxRails) + ")");
  }
  if (b.size() != kAddressRecordHeader + f.perRailBytes * n) {
    return InvalidArgument(what + " of " + std::to_string(b.size()) + " bytes for " + std::to_string(n) + " rails");
  }
  uint64_t id;
  std::memcpy(&id, b.data() + 8, 8);
  if (id == 0) return InvalidArgument(what + " with worker id 0");
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = b.data() + kAddressRecordHeader + f.perRailBytes * i;
    uint32_t ipv4;
    uint16_t port, reserved;
    std::memcpy(&ipv4, p, 4);
    std::memcpy(&port, p + 4, 2);
    std::memcpy(&reserved, p + 6, 2);
    const std::string rail = what + " rail " + std::to_string(i);
    if (ipv4 == 0 || ipv4 == 0xffffffffu) return InvalidArgument(rail + " has no usable IPv4 address");
    if (port == 0) return InvalidArgument(rail + " has port 0");
    if (reserved != 0 && !f.ownsRailWord) return InvalidArgument(rail + " has reserved bits set");
    RY_RETURN_IF_ERROR(onRail(i, ipv4, port, p + (f.ownsRailWord ? 6 : 8)));
  }
  *workerId = id;
  return Status::Ok();
}

}  // namespace railyard::fabric
