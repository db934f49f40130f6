#include "storage/snapshot/blob_mover.h"

#include <sys/mman.h>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>

#include "env/log.h"
#include "proxy/fabric/quiet_wait.h"
#include "storage/snapshot/blob_checksum.h"

namespace railyard::storage::snapshot {
namespace {

/// Longest a failed move waits for its chunks still in flight (see Move).
constexpr std::chrono::seconds kDrainBackstop{120};
/// How long Probe waits, after its Write, for the connection's other sockets' hellos.
constexpr std::chrono::seconds kQuietBound{3};

}  // namespace

Status BlobMover::Create(fabric::RegistrationCache& cache, fabric::Worker& worker, const MoverOptions& options,
                         std::unique_ptr<BlobMover>* out) {
  if (options.chunkBytes < 4096 || options.chunkBytes > (64ull << 20)) {
    return InvalidArgument("snapshot: chunk bytes " + std::to_string(options.chunkBytes) + " outside 4 KiB..64 MiB");
  }
  if (options.chunksPerRail < 1 || options.chunksPerRail > 64) {
    return InvalidArgument("snapshot: chunks per rail " + std::to_string(options.chunksPerRail) + " outside 1..64");
  }
  std::unique_ptr<BlobMover> m(new BlobMover(cache, worker));
  m->options_ = options;
  const size_t rails = std::max<size_t>(1, cache.domain().rails().size());
  m->slots_ = rails * static_cast<uint64_t>(options.chunksPerRail);
  m->stagingBytes_ = m->slots_ * options.chunkBytes;
  void* p = ::mmap(nullptr, m->stagingBytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return SystemError("snapshot: cannot map " + std::to_string(m->stagingBytes_) + " staging bytes");
  m->staging_ = static_cast<uint8_t*>(p);
  RY_RETURN_IF_ERROR(cache.Acquire(p, m->stagingBytes_, fabric::kAccessLocal, fabric::MemoryKind::kHost, &m->region_));
  *out = std::move(m);
  return Status::Ok();
}

BlobMover::~BlobMover() {
  if (region_ != nullptr) {
    // Staging the NIC may still hold is never unmapped (a late Read could land in
    // reused pages): kept mapped until exit.
    if (Status st = cache_.Release(region_); !st.ok()) {
      RY_WARN("snapshot: the staging buffer's deregistration failed (%s); its %llu bytes stay mapped until the "
              "process exits",
              st.message().c_str(), static_cast<unsigned long long>(stagingBytes_));
      return;
    }
  }
  if (staging_ != nullptr) ::munmap(staging_, stagingBytes_);
}

Status BlobMover::Probe(fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr) {
  const uint64_t cookie = nextCookie_++;
  RY_RETURN_IF_ERROR(ep.Write(fabric::LocalSlice{region_, 0, 0}, key, remoteAddr, cookie));
  // The Endpoint ends the Write within its own timeout (done or error); the bound here
  // is only a backstop for a transport that broke that promise.
  const fabric::BringUpResult r =
      fabric::BringUpWait(worker_, ep, cookie, std::chrono::steady_clock::now() + kDrainBackstop, kQuietBound, &events_);
  switch (r.outcome) {
    case fabric::BringUpResult::kDone:
      return Status::Ok();
    case fabric::BringUpResult::kOpFailed:
      return r.error.ToStatus();
    case fabric::BringUpResult::kEndpointFailed:
      return r.endpointStatus;
    case fabric::BringUpResult::kTimedOut:
      break;
  }
  return SystemError("fabric probe: no completion within " + std::to_string(kDrainBackstop.count()) + " s");
}

Status BlobMover::Put(fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr, const void* src,
                      uint64_t bytes, uint64_t* checksum) {
  return Move(true, ep, key, remoteAddr, static_cast<uint8_t*>(const_cast<void*>(src)), bytes, checksum, {});
}

Status BlobMover::Get(fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr, void* dst,
                      uint64_t bytes, uint64_t* checksum, const ReadyGate& gate) {
  return Move(false, ep, key, remoteAddr, static_cast<uint8_t*>(dst), bytes, checksum, gate);
}

Status BlobMover::Move(bool write, fabric::Endpoint& ep, const fabric::RemoteKey& key, uint64_t remoteAddr,
                       uint8_t* user, uint64_t bytes, uint64_t* checksum, const ReadyGate& gate) {
  // Caller memory inside a live registration (NCCL's regMr, or the caller's own
  // Acquire) is moved straight from or into: no staging copy. Host memory only: the
  // checksum reads the bytes with the CPU.
  const fabric::Region* direct = nullptr;
  (void)cache_.AcquireLive(user, bytes, fabric::kAccessLocal, fabric::MemoryKind::kHost, &direct);  // false: stays nullptr
  const uint64_t directOffset = direct != nullptr ? reinterpret_cast<uint64_t>(user) - direct->base : 0;
  if (direct != nullptr) ++directMoves_;
  LeafChecksum hash(user, bytes);
  struct Pending {
    uint64_t offset, bytes, slot;
  };
  std::map<uint64_t, Pending> inFlight;  // cookie -> chunk
  std::deque<uint64_t> freeSlots;
  for (uint64_t s = 0; s < slots_; ++s) freeSlots.push_back(s);
  // A leaf of the checksum is hashed once its bytes have all landed (reads complete
  // out of order) or, for a put, been posted.
  uint64_t hashedTo = 0;  // a put's bytes announced to `hash`
  uint64_t next = 0;
  uint64_t ready = gate ? 0 : bytes;  // the source's bytes that may be read yet
  Status result;
  const uint64_t chunk = options_.chunkBytes;
  while ((next < bytes || !inFlight.empty()) && result.ok()) {
    while (next < bytes && !freeSlots.empty()) {
      uint64_t n = std::min(chunk, bytes - next);
      if (next + n > ready) {
        uint64_t now = ready;
        if (Status g = gate(inFlight.empty(), &now); !g.ok()) {
          result = g;
          break;
        }
        if (now < ready || now > bytes) {
          result = InternalError("snapshot: a ready gate went from " + std::to_string(ready) + " to " +
                                 std::to_string(now) + " bytes of " + std::to_string(bytes));
          break;
        }
        ready = now;
        if (next >= ready) break;  // nothing new there yet: move what is in flight
        // What has landed, though less than a chunk: a fault's pieces are read on as
        // they land (a 1 MiB blob in 256 KiB pieces was read only once whole).
        n = std::min(n, ready - next);
      }
      const uint64_t slot = freeSlots.front();
      freeSlots.pop_front();
      const fabric::LocalSlice local =
          direct != nullptr ? fabric::LocalSlice{direct, directOffset + next, n} : fabric::LocalSlice{region_, slot * chunk, n};
      const uint64_t cookie = nextCookie_++;
      Status st;
      if (write) {
        if (direct == nullptr) std::memcpy(local.data(), user + next, n);
        st = ep.Write(local, key, remoteAddr + next, cookie);  // hashed below, while it moves
      } else {
        st = ep.Read(local, key, remoteAddr + next, cookie);
      }
      if (!st.ok()) {
        result = st;
        break;
      }
      inFlight[cookie] = Pending{next, n, slot};
      next += n;
    }
    if (!result.ok()) break;
    events_.clear();
    worker_.Progress(&events_);
    for (const fabric::Event& e : events_) {
      if (e.kind != fabric::EventKind::kDone && e.kind != fabric::EventKind::kError) continue;
      auto it = inFlight.find(e.cookie);
      if (it == inFlight.end()) continue;
      if (e.kind == fabric::EventKind::kError) {
        if (result.ok()) result = e.error.ToStatus();
        inFlight.erase(it);
        continue;
      }
      const Pending p = it->second;
      inFlight.erase(it);
      if (!write) {
        if (direct == nullptr) std::memcpy(user + p.offset, staging_ + p.slot * chunk, p.bytes);
        hash.Landed(p.offset, p.bytes);
      }
      freeSlots.push_back(p.slot);
    }
    if (!ep.status().ok() && result.ok()) result = ep.status();
    // A put's chunks are hashed once posted and pushed to the transport by the Progress
    // above, so the hash overlaps their transfer (hashed before the post, a 1 MiB blob's
    // 55 us of XXH3 came before its first byte moved). From the caller's buffer, which
    // stays as it is for the whole call (a staging slot may be reused once its Write is
    // done).
    if (write && result.ok() && hashedTo < next) {
      hash.Landed(hashedTo, next - hashedTo);
      hashedTo = next;
    }
  }
  // On failure drain ours, so the staging slots are not in use when this returns: a
  // failed Endpoint ends its outstanding ops with error events, a healthy one (a ready
  // gate's error) completes them, each within the Endpoint's own timeout. The bound
  // here is only a backstop for a transport that broke that promise.
  const auto drainUntil = std::chrono::steady_clock::now() + kDrainBackstop;
  while (!inFlight.empty() && std::chrono::steady_clock::now() < drainUntil) {
    events_.clear();
    worker_.Progress(&events_);
    for (const fabric::Event& e : events_) inFlight.erase(e.cookie);
    if (ep.Outstanding() == 0) break;
  }
  // Only a whole transfer's: a failed one's bytes may still be landing (review).
  if (checksum != nullptr && result.ok()) *checksum = hash.Digest();
  if (direct != nullptr) {
    if (inFlight.empty() || ep.Outstanding() == 0) {
      (void)cache_.Release(direct);
    } else {
      // The transport may still move bytes from or into the caller's memory: keep the
      // count, so its owner's Release cannot deregister it under them (a leak of one
      // registration, logged, over a use after free).
      RY_WARN("snapshot: %zu chunk(s) of a failed transfer still outstanding; the caller's registration at %p stays "
              "held",
              inFlight.size(), static_cast<void*>(user));
    }
  }
  return result;
}

}  // namespace railyard::storage::snapshot
