// How relayed routes tag the fabric ops they post on their legs: the cookie names
// the route, what the op is for, and a slot, so a Worker's events find their route.
#pragma once

#include <cstdint>

namespace railyard::fabric::relay {

/// What a leg op is for.
enum class LegTag : uint8_t {
  kPayload = 1,  ///< source: a chunk's payload Write into a relay slot
  kHeader = 2,   ///< source: a slot's header Write (with the slot's immediate)
  kControl = 3,  ///< either side: a control record (Send)
  kDown = 4,     ///< relay: the downstream op of up slot `index`
  kDownRead = 5, ///< relay: a downstream Read chunk into staging slot `index`
  kBack = 6,     ///< relay: the Write of staging slot `index` back to the source
};

/// route (24 bits) << 40 | tag << 32 | index (32 bits).
inline uint64_t MakeLegCookie(uint32_t route, LegTag tag, uint32_t index) {
  return (static_cast<uint64_t>(route & 0xffffff) << 40) | (static_cast<uint64_t>(tag) << 32) | index;
}
inline uint32_t CookieRoute(uint64_t c) { return static_cast<uint32_t>(c >> 40); }
inline LegTag CookieTag(uint64_t c) { return static_cast<LegTag>((c >> 32) & 0xff); }
inline uint32_t CookieIndex(uint64_t c) { return static_cast<uint32_t>(c); }

}  // namespace railyard::fabric::relay
