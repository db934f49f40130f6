// Endpoint: the initiator's connection to one peer Worker, over every rail of the
// cable (or, later, through relays). Operations carry a caller cookie; their
// completions come back as Events from the Worker that created the Endpoint.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

#include "env/status.h"
#include "proxy/fabric/fabric_error.h"
#include "proxy/fabric/region.h"
#include "proxy/fabric/remote_key.h"

namespace railyard::fabric {

/// Local memory of an operation: [region->base + offset, + bytes), inside a Region of
/// the same Domain registered with kAccessLocal.
struct LocalSlice {
  const Region* region = nullptr;
  uint64_t offset = 0;
  uint64_t bytes = 0;

  char* data() const { return reinterpret_cast<char*>(region->base + offset); }
};

/// Initiator side of a connection. Not thread-safe: one thread posts ops and calls
/// its Worker's Progress.
///
/// Posting never blocks; an op posted while the connection is still being set up or
/// while the window is full is queued and goes out from Progress. Each op ends in
/// exactly one kDone or kError event with its cookie (unless the Endpoint is destroyed
/// first: then its outstanding ops end with no event).
///
/// Ordering (the rule every transport keeps): a Write's immediate, a FetchAdd and a
/// Send record become visible at the target only after the data of every Write
/// posted before them on this Endpoint, even when those Writes were striped over
/// several rails. Reads observe every Write posted before them. Nothing else is
/// ordered without a Fence.
///
/// Remote addresses are not checked here: the target is the authority (it refuses
/// with a named remote-access error and the Endpoint fails, as an RC QP does).
/// After any error the Endpoint stays failed: every outstanding op ends with an
/// error event and every later post returns the error.
class Endpoint {
 public:
  virtual ~Endpoint() = default;

  /// Sends a small record (1..Capabilities::maxRecordBytes bytes; copied before this
  /// returns). The peer's Worker returns it as a kRecord event. kDone when the peer
  /// has delivered it.
  virtual Status Send(std::span<const uint8_t> record, uint64_t cookie) = 0;
  /// Writes `src` to [remoteAddr, + src.bytes) of the peer's region `key` (0 bytes
  /// allowed). With `immediate`, the peer's Worker returns a kImmediate event after
  /// the data (and every earlier Write's data) is in place. kDone when the data has
  /// landed at the target. `src` must stay registered and unchanged until then.
  virtual Status Write(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr,
                       uint64_t cookie, std::optional<uint32_t> immediate = std::nullopt) = 0;
  /// The last piece of one Write that its poster cut into several Writes on this
  /// Endpoint (a relay forwarding a Write slot by slot, relay/forward_route.h): writes
  /// `src` to [remoteAddr, + src.bytes) with `immediate`, and the peer's kImmediate
  /// reports Event::bytes = `opBytes`, the whole Write's size (its earlier bytes were
  /// Written before this on this Endpoint, so the ordering rule makes them visible
  /// first). InvalidArgument when opBytes < src.bytes. Added (additively) for issue 10:
  /// TCP, verbs (in its write-size record) and the fake transport carry opBytes to the
  /// target. Default, for a transport that cannot: a plain Write with the immediate
  /// (the target reports src.bytes).
  virtual Status WriteFinal(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                            uint32_t immediate, uint64_t opBytes) {
    if (opBytes < src.bytes) return InvalidArgument("fabric WriteFinal: a whole Write smaller than its last piece");
    return Write(src, key, remoteAddr, cookie, immediate);
  }
  /// A Write (as Write) whose caller does not wait for its kDone: the transport may
  /// report it late, in one batch with other such Writes, so that a Write's completion
  /// does not cost a message of its own (the receive comm's clear-to-send records, the
  /// send comm's eager Writes from its bounce slots). Its kDone still comes, and before
  /// Outstanding() reaches 0: no later than the completion of any later op on this
  /// Endpoint that is not such a Write, and otherwise within a bounded delay
  /// (TCP: tcp::kMaxDeferredAcks Writes or tcp::kDeferredAckMicros). Ordering, the
  /// immediate and errors are exactly as Write's. Added (additively) for issue 10
  /// "Small messages"; default: a plain Write (verbs, relayed and fake Endpoints).
  virtual Status WriteLazy(const LocalSlice& src, const RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                           std::optional<uint32_t> immediate = std::nullopt) {
    return Write(src, key, remoteAddr, cookie, immediate);
  }
  /// Reads [remoteAddr, + dst.bytes) of the peer's region `key` into `dst`. kDone when
  /// every byte is in `dst`; on error `dst`'s contents are undefined.
  virtual Status Read(const LocalSlice& dst, const RemoteKey& key, uint64_t remoteAddr,
                      uint64_t cookie) = 0;
  /// Atomically adds `add` to the 64-bit word at `remoteAddr` (8-byte aligned) of the
  /// peer's region `key`, after every Write posted before it has landed. kDone carries
  /// the word's old value in Event::value.
  virtual Status FetchAdd(const RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) = 0;
  /// Ops posted after the fence start only after every op posted before it has
  /// completed; the fence's own kDone comes at that point (so it is also a flush).
  virtual Status Fence(uint64_t cookie) = 0;

  /// Ok, or the error that failed the Endpoint (sticky).
  virtual Status status() const = 0;
  /// Ops posted and not yet completed (including fences).
  virtual size_t Outstanding() const = 0;
  /// "w=<id> 127.0.0.2:40121": the peer, as errors name it.
  virtual std::string PeerName() const = 0;
  /// How many routes this Endpoint spreads its ops over, each reaching the peer from
  /// a Worker of its own (relay::MultiRouteEndpoint: one per relay on a shortest
  /// path); 1 for a plain Endpoint. A peer that checks which Worker ops come from
  /// accepts that many (proxy/nccl/peer_workers.h). Added (additively) for issue 10
  /// "Relays".
  virtual size_t Routes() const { return 1; }
  /// From now on a peer that closes or resets the connection is logged at INFO, not
  /// WARN, whatever is outstanding, because the owner either is ending its use of
  /// this Endpoint (a comm closing: its close notice may still be outstanding when
  /// the peer closes at the same moment) or passes the error on to whoever lost
  /// something (a relay's legs: the route's source gets the named error). Error
  /// events and status() are unchanged (a named PEER_CLOSED), and every other fault
  /// still WARNs. Default: no effect. Added (additively) for issue 10: a clean
  /// fabric-mode end (ranks relaying for each other) printed WARN.
  virtual void QuietPeerClose() {}
};

}  // namespace railyard::fabric
