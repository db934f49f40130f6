#include "proxy/runtime/cable_endpoint.h"

#include "proxy/runtime/cable_set_domain.h"

namespace railyard::runtime {

Status CutRemoteKey(const fabric::RemoteKey& key, const std::vector<uint8_t>& peerIndices, fabric::RemoteKey* out) {
  fabric::RemoteKey k = key;
  k.railRkeys.clear();
  for (uint8_t i : peerIndices) {
    if (i >= key.railRkeys.size()) {
      return InvalidArgument("fabric mode: the peer's key has " + std::to_string(key.railRkeys.size()) +
                             " rail rkeys, but its cable's rail uses slot " + std::to_string(i) +
                             " (a key of another host, or one registered without RDMA rails)");
    }
    k.railRkeys.push_back(key.railRkeys[i]);
  }
  *out = std::move(k);
  return Status::Ok();
}

CableEndpoint::CableEndpoint(std::unique_ptr<fabric::Endpoint> inner, CableSetDomain* set, const fabric::Domain* cable,
                             std::vector<uint8_t> localIndices, std::vector<uint8_t> peerIndices)
    : inner_(std::move(inner)),
      set_(set),
      cable_(cable),
      localIndices_(std::move(localIndices)),
      peerIndices_(std::move(peerIndices)) {}

Status CableEndpoint::Local(const fabric::LocalSlice& in, fabric::LocalSlice* out,
                            std::shared_ptr<const fabric::Region>* hold) {
  if (in.region == nullptr) return InvalidArgument("fabric mode: no local region");
  *hold = set_->ViewFor(in.region, cable_, localIndices_);
  if (*hold == nullptr) return InvalidArgument("fabric mode: the local region is not registered in this Domain");
  *out = fabric::LocalSlice{hold->get(), in.offset, in.bytes};
  return Status::Ok();
}

Status CableEndpoint::Cut(const fabric::RemoteKey& in, fabric::RemoteKey* out) const {
  return CutRemoteKey(in, peerIndices_, out);
}

Status CableEndpoint::Translate(const fabric::LocalSlice& local, const fabric::RemoteKey& key, Translated* out) {
  RY_RETURN_IF_ERROR(Local(local, &out->local, &out->hold));
  return Cut(key, &out->key);
}

Status CableEndpoint::Write(const fabric::LocalSlice& src, const fabric::RemoteKey& key, uint64_t remoteAddr,
                            uint64_t cookie, std::optional<uint32_t> immediate) {
  Translated t;
  RY_RETURN_IF_ERROR(Translate(src, key, &t));
  return inner_->Write(t.local, t.key, remoteAddr, cookie, immediate);
}

Status CableEndpoint::WriteFinal(const fabric::LocalSlice& src, const fabric::RemoteKey& key, uint64_t remoteAddr,
                                 uint64_t cookie, uint32_t immediate, uint64_t opBytes) {
  Translated t;
  RY_RETURN_IF_ERROR(Translate(src, key, &t));
  return inner_->WriteFinal(t.local, t.key, remoteAddr, cookie, immediate, opBytes);
}

Status CableEndpoint::WriteLazy(const fabric::LocalSlice& src, const fabric::RemoteKey& key, uint64_t remoteAddr,
                                uint64_t cookie, std::optional<uint32_t> immediate) {
  Translated t;
  RY_RETURN_IF_ERROR(Translate(src, key, &t));
  return inner_->WriteLazy(t.local, t.key, remoteAddr, cookie, immediate);
}

Status CableEndpoint::Read(const fabric::LocalSlice& dst, const fabric::RemoteKey& key, uint64_t remoteAddr,
                           uint64_t cookie) {
  Translated t;
  RY_RETURN_IF_ERROR(Translate(dst, key, &t));
  return inner_->Read(t.local, t.key, remoteAddr, cookie);
}

Status CableEndpoint::FetchAdd(const fabric::RemoteKey& key, uint64_t remoteAddr, uint64_t add, uint64_t cookie) {
  fabric::RemoteKey k;
  RY_RETURN_IF_ERROR(Cut(key, &k));
  return inner_->FetchAdd(k, remoteAddr, add, cookie);
}

}  // namespace railyard::runtime
