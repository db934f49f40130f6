// CableEndpoint: an Endpoint over a verbs cable of a CableSetDomain (straight or
// relayed), as the set's callers see it. They hold the set's Regions, whose keys
// cover every fabric rail of the host, and the peer's RemoteKeys, which cover every
// fabric rail of the peer; the cable's verbs Endpoint knows only the cable's rails.
// So each op's local Region becomes its view for the cable's verbs Domain
// (CableSetDomain::ViewFor: the same bytes, the cable rails' lkeys) and the peer's
// key is cut to the rkeys of the peer's rails of the cable it is reached on (in the
// order of that cable's rails, which pair with this cable's by LinksBetween order).
// Everything else passes through.
//
// Threading: as the Endpoint it wraps.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "proxy/fabric/domain.h"
#include "proxy/fabric/endpoint.h"

namespace railyard::runtime {

class CableSetDomain;

/// See file comment.
class CableEndpoint : public fabric::Endpoint {
 public:
  /// `inner`: the cable's Endpoint (of Domain `cable`, whose rails are this host's
  /// fabric rails `localIndices`); `peerIndices`: the peer's fabric rail index of each
  /// rail of the cable the peer is reached on (from its HostAddress). `set` outlives it.
  CableEndpoint(std::unique_ptr<fabric::Endpoint> inner, CableSetDomain* set, const fabric::Domain* cable,
                std::vector<uint8_t> localIndices, std::vector<uint8_t> peerIndices);

  Status Send(std::span<const uint8_t> record, uint64_t cookie) override { return inner_->Send(record, cookie); }
  /// The view of `src` and the cut key; InvalidArgument for a region not registered in
  /// the set, or a key with too few rails for the peer's cable (nothing is posted).
  Status Write(const fabric::LocalSlice& src, const fabric::RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
               std::optional<uint32_t> immediate = std::nullopt) override;
  Status WriteFinal(const fabric::LocalSlice& src, const fabric::RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                    uint32_t immediate, uint64_t opBytes) override;
  Status WriteLazy(const fabric::LocalSlice& src, const fabric::RemoteKey& key, uint64_t remoteAddr, uint64_t cookie,
                   std::optional<uint32_t> immediate = std::nullopt) override;
  Status Read(const fabric::LocalSlice& dst, const fabric::RemoteKey& key, uint64_t remoteAddr,
              uint64_t cookie) override;
  Status FetchAdd(const fabric::RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) override;
  Status Fence(uint64_t cookie) override { return inner_->Fence(cookie); }
  Status status() const override { return inner_->status(); }
  size_t Outstanding() const override { return inner_->Outstanding(); }
  std::string PeerName() const override { return inner_->PeerName(); }
  size_t Routes() const override { return inner_->Routes(); }
  void QuietPeerClose() override { inner_->QuietPeerClose(); }

 private:
  /// The view of `in`'s region (kept alive in *hold for the post) as *out.
  Status Local(const fabric::LocalSlice& in, fabric::LocalSlice* out, std::shared_ptr<const fabric::Region>* hold);
  Status Cut(const fabric::RemoteKey& in, fabric::RemoteKey* out) const;
  /// An op's local slice and remote key as the cable's Endpoint takes them.
  struct Translated {
    fabric::LocalSlice local;
    fabric::RemoteKey key;
    std::shared_ptr<const fabric::Region> hold;  ///< keeps the view alive through the post
  };
  Status Translate(const fabric::LocalSlice& local, const fabric::RemoteKey& key, Translated* out);

  std::unique_ptr<fabric::Endpoint> inner_;
  CableSetDomain* set_;
  const fabric::Domain* cable_;
  std::vector<uint8_t> localIndices_;
  std::vector<uint8_t> peerIndices_;
};

/// `key` cut to the rkeys at `peerIndices` (in that order); InvalidArgument naming
/// the slot when the key has too few rails. Exposed for tests.
Status CutRemoteKey(const fabric::RemoteKey& key, const std::vector<uint8_t>& peerIndices, fabric::RemoteKey* out);

}  // namespace railyard::runtime
