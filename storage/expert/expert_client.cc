#include "storage/expert/expert_client.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <vector>

#include "proxy/fabric/quiet_wait.h"
#include "storage/expert/expert_error.h"
#include "storage/expert/expert_wire.h"

namespace railyard::expert {
namespace {

/// The last cause a peer may send: the packer's own (kPackInput, after it) is no reply's
/// (review: a peer could make a fetch return 15, which the C API does not list).
constexpr int kLastErrc = static_cast<int>(ExpertErrc::kInvalidArgument);

/// A fabric error of a Read of a key the peer no longer honours: it withdrew its layer
/// registrations because the store changed under it (or it is stopping).
bool Withdrawn(fabric::FabricErrc e) {
  return e == fabric::FabricErrc::kBadKey || e == fabric::FabricErrc::kDeregistered ||
         e == fabric::FabricErrc::kRemoteAccess;
}

/// An expert error's message without its "expert NAME: " prefix, to quote it inside another.
std::string WithoutPrefix(const Status& s) {
  std::string m = s.message();
  const std::string prefix = std::string("expert ") + ExpertErrcName(ExpertErrcOf(s)) + ": ";
  if (m.rfind(prefix, 0) == 0) m.erase(0, prefix.size());
  return m;
}

}  // namespace

Status ReadReply(int fd, const std::string& who, uint64_t* payloadBytes) {
  ReplyHeader h{};
  RY_RETURN_IF_ERROR(WireRecv(fd, &h, sizeof h, who + " reply"));
  if (h.textBytes > kMaxReplyText || h.errc > kLastErrc) {
    return ExpertError(ExpertErrc::kProtocol, who + " sent a reply with errc " + std::to_string(h.errc) + " and " +
                                                  std::to_string(h.textBytes) + " text bytes");
  }
  std::string text(h.textBytes, '\0');
  RY_RETURN_IF_ERROR(WireRecv(fd, text.data(), text.size(), who + " reply text"));
  if (h.errc != 0) {
    if (h.payloadBytes != 0) return ExpertError(ExpertErrc::kProtocol, who + " sent an error reply with a payload");
    // The peer's text says "expert NAME: ..."; the cause comes from errc, the rest is its sentence.
    const ExpertErrc errc = static_cast<ExpertErrc>(h.errc);
    const std::string prefix = std::string("expert ") + ExpertErrcName(errc) + ": ";
    if (text.rfind(prefix, 0) == 0) text.erase(0, prefix.size());
    return ExpertError(errc, "peer " + who + " says: " + text);
  }
  *payloadBytes = h.payloadBytes;
  return Status::Ok();
}

ExpertClient::~ExpertClient() {
  (void)Close();
  endpoint_.reset();
  if (arena_ != nullptr) (void)cache_->Release(arena_);
  if (fd_ >= 0) ::close(fd_);
}

Status ExpertClient::Open(const std::string& peer, const ClientOptions& options, fabric::RegistrationCache& cache,
                          fabric::Worker* worker, void* arena, uint64_t arenaBytes, std::unique_ptr<ExpertClient>* out) {
  if (arena == nullptr || arenaBytes == 0) return ExpertError(ExpertErrc::kInvalidArgument, "open with no arena");
  if (reinterpret_cast<uintptr_t>(arena) + arenaBytes < reinterpret_cast<uintptr_t>(arena)) {
    // Said before connecting (C API trial: it failed SYSTEM at the registration, after
    // the peer's hello).
    return ExpertError(ExpertErrc::kInvalidArgument, "an arena of " + std::to_string(arenaBytes) + " bytes at " +
                                                         std::to_string(reinterpret_cast<uintptr_t>(arena)) +
                                                         " wraps the address space");
  }
  if (options.transport == kTransportRead && worker == nullptr) {
    return ExpertError(ExpertErrc::kInvalidArgument, "the read transport needs a fabric Worker");
  }
  std::string host;
  uint16_t port = 0;
  RY_RETURN_IF_ERROR(ParseHostPort(peer, &host, &port));
  std::unique_ptr<ExpertClient> c(new ExpertClient());
  // Until the open completes, a failure closes without the polite shutdown: the peer
  // that failed the open (silent, or speaking something else) would only make the
  // destructor wait RAILYARD_TIMEOUT_MS more for its reply.
  c->closed_ = true;
  c->options_ = options;
  c->peer_ = options.peerName.empty() ? peer : options.peerName;
  const std::string& who = c->peer_;
  c->cache_ = &cache;
  c->worker_ = worker;
  if (Status s = WireConnect(host, port, options.timeoutMs, &c->fd_); !s.ok()) {
    if (options.peerName.empty()) return s;
    // The cause kept; the peer asked for named before the address dialed.
    return ExpertError(ExpertErrcOf(s), "expert peer " + who + ": " + WithoutPrefix(s));
  }
  // The transport choice goes out before the hello is read: a store reads it after its
  // hello and manifest (the socket keeps it meanwhile), and a port that waits for its
  // client to speak first refuses it at once: a snapshot peer answers these 8 bytes
  // with its refusal instead of both ends waiting out their timeouts (C API trial: 30 s,
  // then PROTOCOL or PEER_LOST by which timeout came first). A send that fails shows
  // as the hello's failure below, which names more.
  ChooseMessage choose{};
  choose.transport = options.transport;
  (void)WireSend(c->fd_, &choose, sizeof choose, "expert peer " + who + " transport choice");
  HelloHeader hello{};
  if (Status s = WireRecv(c->fd_, &hello, sizeof hello, "expert peer " + who + " hello"); !s.ok()) {
    // An expert store speaks first, at once; a port that waits for the client to speak
    // (another protocol's) stays silent until the timeout (new-user trial: "peer silent
    // (timeout)" and nothing more). A store at its limits that closes before reading the
    // choice sent above resets the connection instead of closing it.
    const bool reset = s.message().find(std::strerror(ECONNRESET)) != std::string::npos;
    if (reset || s.message().find("the peer closed the connection") != std::string::npos) {
      // A store at its connection limits closes a new connection before its hello (trial:
      // the client saw only PEER_LOST; a later one: only the 256 limit was named, not the
      // 64 per address); the store's log WARNs each such refusal.
      const std::string closed = reset ? "expert peer " + who + " hello: the peer closed the connection (a reset)"
                                       : WithoutPrefix(s);
      return ExpertError(ExpertErrcOf(s), closed + " before its hello: an expert store does so when it "
                                          "already serves its most clients at once (256), or its most from this "
                                          "address (64; its log WARNs \"refused a client\" saying which), or the "
                                          "port's service is not an expert store");
    }
    if (s.message().find("peer silent (timeout)") == std::string::npos) return s;
    return ExpertError(ExpertErrcOf(s), WithoutPrefix(s) + ": an expert store sends its hello as soon as it accepts, so "
                                        "the peer is frozen or overloaded, or this port is not an expert store's (another "
                                        "service, which waits for its client to speak first)");
  }
  if (hello.magic == 0x41535952) {  // "RYSA": a snapshot peer's handshake reply (storage/snapshot/snapshot_wire.h)
    return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " is a snapshot peer's port (it answered with the "
                                              "snapshot tier's handshake reply), not an expert store's");
  }
  if (hello.magic != kHelloMagic) return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " is not an expert store (bad hello magic)");
  if (hello.version != kWireVersion) {
    return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " speaks wire version " + std::to_string(hello.version) +
                                                  " (this build: " + std::to_string(kWireVersion) + ")");
  }
  if (hello.manifestBytes > kMaxManifestBytes) {
    return ExpertError(ExpertErrc::kManifestTooLarge, "expert peer " + who + " announces a manifest of " +
                                                          std::to_string(hello.manifestBytes) + " bytes (at most " +
                                                          std::to_string(kMaxManifestBytes) + ")");
  }
  std::string text(hello.manifestBytes, '\0');
  if (Status s = WireRecv(c->fd_, text.data(), text.size(), "expert peer " + who + " manifest"); !s.ok()) {
    return ExpertError(ExpertErrc::kManifestTruncated, s.message());
  }
  RY_RETURN_IF_ERROR(Manifest::Parse(text, &c->manifest_));
  if (arenaBytes < c->manifest_.recordStride) {
    // (new-user trial: a 100-byte arena opened, and only the first fetch failed)
    return ExpertError(ExpertErrc::kInvalidArgument, "expert peer " + who + ": the arena of " + std::to_string(arenaBytes) +
                                                         " bytes cannot hold one record (stride " +
                                                         std::to_string(c->manifest_.recordStride) + " bytes)");
  }
  uint64_t payload = 0;
  RY_RETURN_IF_ERROR(ReadReply(c->fd_, who, &payload));
  if (options.transport == kTransportRead) {
    if (payload > 8 + kMaxAddressBytes + c->manifest_.layers.size() * (4 + kMaxAddressBytes)) {
      return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " sent a " + std::to_string(payload) + "-byte key table");
    }
    std::vector<uint8_t> p(payload);
    RY_RETURN_IF_ERROR(WireRecv(c->fd_, p.data(), p.size(), "expert peer " + who + " key table"));
    size_t at = 0;
    auto get32 = [&](uint32_t* v) {
      if (p.size() - at < 4) return false;
      std::memcpy(v, p.data() + at, 4);
      at += 4;
      return true;
    };
    uint32_t addrBytes = 0, layers = 0;
    if (!get32(&addrBytes) || addrBytes > kMaxAddressBytes || p.size() - at < addrBytes) {
      return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " key table: bad worker address length");
    }
    std::vector<uint8_t> addr(p.begin() + static_cast<long>(at), p.begin() + static_cast<long>(at + addrBytes));
    at += addrBytes;
    if (!get32(&layers) || layers != c->manifest_.layers.size()) {
      return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " key table: layer count differs from its manifest");
    }
    for (uint32_t i = 0; i < layers; ++i) {
      uint32_t kb = 0;
      if (!get32(&kb) || kb > kMaxAddressBytes || p.size() - at < kb) {
        return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " key table: bad key length");
      }
      fabric::RemoteKey k;
      if (Status s = fabric::RemoteKey::Unpack(std::span<const uint8_t>(p.data() + at, kb), &k); !s.ok()) {
        return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " layer " + std::to_string(i) + " key: " + s.message());
      }
      if (k.length < c->manifest_.LayerFileBytes()) {
        return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " layer " + std::to_string(i) + " key covers " +
                                                      std::to_string(k.length) + " bytes, fewer than its file");
      }
      at += kb;
      c->layerKeys_.push_back(std::move(k));
    }
    if (at != p.size()) return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " key table has trailing bytes");
    if (Status s = worker->Connect(addr, &c->endpoint_); !s.ok()) {
      return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " worker address: " + s.message());
    }
  } else if (payload != 0) {
    return ExpertError(ExpertErrc::kProtocol, "expert peer " + who + " sent a payload with its tcp accept");
  }
  if (Status s = cache.Acquire(arena, arenaBytes, fabric::kAccessLocal, fabric::MemoryKind::kHost, &c->arena_); !s.ok()) {
    return ExpertError(ExpertErrc::kSystem, "registering the arena: " + s.message());
  }
  c->arenaBase_ = arena;
  c->arenaBytes_ = arenaBytes;
  if (options.transport == kTransportRead) RY_RETURN_IF_ERROR(c->BringUpFabric());
  c->closed_ = false;
  *out = std::move(c);
  return Status::Ok();
}

Status ExpertClient::BringUpFabric() {
  if (layerKeys_.empty()) return Status::Ok();
  const fabric::RemoteKey& key = layerKeys_.front();
  const uint64_t cookie = nextCookie_++;
  const uint64_t arenaInRegion = reinterpret_cast<uint64_t>(arenaBase_) - arena_->base;
  const std::string what = "expert peer " + peer_ + ": bringing the fabric connection up (a zero-byte Read): ";
  if (Status s = endpoint_->Read(fabric::LocalSlice{arena_, arenaInRegion, 0}, key, key.base, cookie); !s.ok()) {
    return ExpertError(ExpertErrc::kPeerLost, what + s.message());
  }
  // The Endpoint ends the Read within its own timeout (done or error); the bound here
  // is a backstop for a transport that broke that promise.
  // The Read went on one socket: BringUpWait also lets the connection's others (a SYN
  // retried) get their hellos out before the handle may rest (review: else a peer
  // closed them past its RAILYARD_ACCEPT_TIMEOUT_MS).
  const int64_t backstopMs = 2 * static_cast<int64_t>(options_.timeoutMs);
  std::vector<fabric::Event> events;
  const fabric::BringUpResult r =
      fabric::BringUpWait(*worker_, *endpoint_, cookie, std::chrono::steady_clock::now() + std::chrono::milliseconds(backstopMs),
                          std::chrono::seconds(3), &events);
  switch (r.outcome) {
    case fabric::BringUpResult::kDone:
      return Status::Ok();
    case fabric::BringUpResult::kOpFailed:
      return ExpertError(Withdrawn(r.error.errc) ? ExpertErrc::kStoreChanged : ExpertErrc::kPeerLost,
                         what + r.error.ToString());
    case fabric::BringUpResult::kEndpointFailed:
      return ExpertError(ExpertErrc::kPeerLost, what + r.endpointStatus.message());
    case fabric::BringUpResult::kTimedOut:
      break;
  }
  return ExpertError(ExpertErrc::kPeerLost, what + "no answer for " + std::to_string(backstopMs) + " ms");
}

Status ExpertClient::Fetch(uint32_t layer, uint64_t expert, uint64_t arenaOffset) {
  RecordRequest r{layer, expert, arenaOffset};
  return FetchBatch(std::span<const RecordRequest>(&r, 1));
}

Status CheckDisjointSlots(std::span<const RecordRequest> batch, uint64_t stride) {
  std::vector<size_t> order(batch.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return batch[a].arenaOffset < batch[b].arenaOffset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const RecordRequest& lo = batch[order[k - 1]];
    const RecordRequest& hi = batch[order[k]];
    if (hi.arenaOffset - lo.arenaOffset >= stride) continue;
    const size_t a = std::min(order[k - 1], order[k]), b = std::max(order[k - 1], order[k]);
    auto text = [&](size_t i) {
      return "record " + std::to_string(i) + " (layer index " + std::to_string(batch[i].layer) + " expert " +
             std::to_string(batch[i].expert) + ", arena slot at " + std::to_string(batch[i].arenaOffset) + ")";
    };
    return ExpertError(ExpertErrc::kInvalidArgument,
                       text(a) + " and " + text(b) + " overlap: each record takes " + std::to_string(stride) +
                           " bytes (the record stride), so slots must be at least that far apart; nothing was fetched");
  }
  return Status::Ok();
}

Status ExpertClient::FetchBatch(std::span<const RecordRequest> batch) {
  if (!failed_.ok()) {
    // Name this request, then the failure that stopped the client (once, with one prefix).
    std::string what = "fetch of ";
    if (batch.size() != 1) what += std::to_string(batch.size()) + " records" + (batch.empty() ? "" : " (first: ");
    if (!batch.empty()) {
      what += "layer index " + std::to_string(batch[0].layer) + " expert " + std::to_string(batch[0].expert);
      if (batch.size() != 1) what += ")";
    }
    return ExpertError(ExpertErrcOf(failed_), what + ": not sent, this client stopped at an earlier failure (" +
                                                  WithoutPrefix(failed_) + "); open a new client");
  }
  if (closed_) return ExpertError(ExpertErrc::kInvalidArgument, "fetch on a closed expert client");
  const uint64_t stride = manifest_.recordStride;
  for (const RecordRequest& r : batch) {
    if (r.layer >= manifest_.layers.size() || r.expert >= manifest_.expertsPerLayer) {
      // Indices are not the model's layer numbers when it has dense layers: say which
      // they are (new-user trial: a model layer number asked for failed, or fetched
      // another layer, with no word of the mapping).
      std::string model;
      for (size_t i = 0; i < manifest_.layers.size() && i < 8; ++i) {
        model += (i == 0 ? "" : ", ") + std::to_string(manifest_.layers[i].layer);
      }
      if (manifest_.layers.size() > 8) model += ", ...";
      return ExpertError(ExpertErrc::kOutOfRange, "layer index " + std::to_string(r.layer) + " expert " +
                                                      std::to_string(r.expert) + " (the store has " +
                                                      std::to_string(manifest_.layers.size()) + " layers x " +
                                                      std::to_string(manifest_.expertsPerLayer) +
                                                      " experts; layer indices 0.. are the model's layers " + model +
                                                      ")");
    }
    if (r.arenaOffset > arenaBytes_ || arenaBytes_ - r.arenaOffset < stride) {
      return ExpertError(ExpertErrc::kOutOfRange, "arena slot at " + std::to_string(r.arenaOffset) + " + " +
                                                      std::to_string(stride) + " bytes outside the " +
                                                      std::to_string(arenaBytes_) + "-byte arena");
    }
    if (r.arenaOffset % manifest_.alignment != 0) {
      // The store aligned every tensor within a record to this; a slot off it would
      // hand the caller misaligned tensors (new-user trial: accepted silently).
      const uint64_t below = r.arenaOffset / manifest_.alignment * manifest_.alignment;
      return ExpertError(ExpertErrc::kInvalidArgument,
                         "arena slot at " + std::to_string(r.arenaOffset) + " (layer index " + std::to_string(r.layer) +
                             " expert " + std::to_string(r.expert) + ") is not a multiple of the store's alignment " +
                             std::to_string(manifest_.alignment) + " (its tensors' offsets are; " +
                             std::to_string(below) + " or " + std::to_string(below + manifest_.alignment) +
                             " would do, as does any multiple of the record stride " + std::to_string(stride) +
                             "); nothing was fetched");
    }
  }
  RY_RETURN_IF_ERROR(CheckDisjointSlots(batch, stride));
  if (batch.empty()) return Status::Ok();
  Status s = options_.transport == kTransportRead ? FetchRead(batch) : FetchTcp(batch);
  if (!s.ok()) {
    const ExpertErrc e = ExpertErrcOf(s);
    // Sticky: a lost peer, a protocol fault, and over READ a withdrawn registration
    // (the fabric Endpoint stays failed after a remote-access error, as an RC QP does).
    if (e == ExpertErrc::kPeerLost || e == ExpertErrc::kProtocol || e == ExpertErrc::kSystem ||
        (options_.transport == kTransportRead && e == ExpertErrc::kStoreChanged)) {
      failed_ = s;
    }
    return s;
  }
  return options_.verifyChecksums ? Verify(batch) : Status::Ok();
}

Status ExpertClient::FetchTcp(std::span<const RecordRequest> batch) {
  // Pipelined: requests go out in windows while replies come back in order.
  constexpr size_t kWindow = 32;
  const uint64_t stride = manifest_.recordStride;
  size_t sent = 0;
  Status first = Status::Ok();
  for (size_t got = 0; got < batch.size(); ++got) {
    while (sent < batch.size() && sent < got + kWindow) {
      RequestMessage req{};
      req.op = kOpFetch;
      req.layer = batch[sent].layer;
      req.expert = batch[sent].expert;
      RY_RETURN_IF_ERROR(WireSend(fd_, &req, sizeof req, "expert peer " + peer_ + " request"));
      ++sent;
    }
    uint64_t payload = 0;
    Status s = ReadReply(fd_, peer_, &payload);
    const ExpertErrc e = ExpertErrcOf(s);
    if (e == ExpertErrc::kPeerLost || e == ExpertErrc::kProtocol) return s;
    if (!s.ok()) {
      if (first.ok()) first = s;  // keep reading the replies in flight; the batch fails
      continue;
    }
    if (payload != stride) {
      return ExpertError(ExpertErrc::kProtocol, "expert peer " + peer_ + " sent a " + std::to_string(payload) +
                                                    "-byte record (stride " + std::to_string(stride) + ")");
    }
    RY_RETURN_IF_ERROR(WireRecv(fd_, ArenaPtr(batch[got].arenaOffset), stride, "expert peer " + peer_ + " record"));
  }
  return first;
}

Status ExpertClient::FetchRead(std::span<const RecordRequest> batch) {
  const uint64_t stride = manifest_.recordStride;
  std::map<uint64_t, size_t> pending;
  for (size_t i = 0; i < batch.size(); ++i) {
    const RecordRequest& r = batch[i];
    const fabric::RemoteKey& key = layerKeys_[r.layer];
    const uint64_t cookie = nextCookie_++;
    const uint64_t arenaInRegion = reinterpret_cast<uint64_t>(arenaBase_) - arena_->base;
    fabric::LocalSlice dst{arena_, arenaInRegion + r.arenaOffset, stride};
    if (Status s = endpoint_->Read(dst, key, key.base + r.expert * stride, cookie); !s.ok()) {
      return ExpertError(ExpertErrc::kPeerLost, "expert peer " + peer_ + ": " + s.message());
    }
    pending.emplace(cookie, i);
  }
  std::vector<fabric::Event> events;
  auto lastMove = std::chrono::steady_clock::now();
  Status first = Status::Ok();
  while (!pending.empty()) {
    events.clear();
    worker_->Progress(&events);
    for (const fabric::Event& e : events) {
      auto it = pending.find(e.cookie);
      if (e.kind == fabric::EventKind::kDone && it != pending.end()) {
        pending.erase(it);
        lastMove = std::chrono::steady_clock::now();
      } else if (e.kind == fabric::EventKind::kError && it != pending.end()) {
        const RecordRequest& r = batch[it->second];
        pending.erase(it);
        if (first.ok()) {
          const bool lost = e.error.errc == fabric::FabricErrc::kPeerClosed || e.error.errc == fabric::FabricErrc::kTimeout ||
                            e.error.errc == fabric::FabricErrc::kConnectFailed || e.error.errc == fabric::FabricErrc::kEndpointFailed ||
                            e.error.errc == fabric::FabricErrc::kSystem;
          first = ExpertError(lost ? ExpertErrc::kPeerLost
                                   : Withdrawn(e.error.errc) ? ExpertErrc::kStoreChanged
                                                             : ExpertErrc::kProtocol,
                              "expert peer " + peer_ + " read of layer " + std::to_string(r.layer) +
                                  " expert " + std::to_string(r.expert) + ": " + e.error.ToString());
        }
      }
    }
    if (!first.ok() && endpoint_->Outstanding() == 0) break;
    if (std::chrono::steady_clock::now() - lastMove > std::chrono::milliseconds(options_.timeoutMs)) {
      // The fabric's own error, when there is one, says more than this watchdog (which
      // route, relay and seq): an error event already seen, else the Endpoint's sticky
      // status (its ops may not all have had their error events yet).
      if (!first.ok()) return AskWhyReadsFailed(first);
      if (Status es = endpoint_->status(); !es.ok()) {
        return AskWhyReadsFailed(ExpertError(ExpertErrc::kPeerLost, "expert peer " + peer_ + ": " + es.message()));
      }
      return ExpertError(ExpertErrc::kPeerLost, "expert peer " + peer_ + ": no read completed for " +
                                                    std::to_string(options_.timeoutMs) + " ms (" + std::to_string(pending.size()) +
                                                    " outstanding) over " + endpoint_->PeerName());
    }
  }
  return first.ok() ? first : AskWhyReadsFailed(first);
}

Status ExpertClient::AskWhyReadsFailed(const Status& fabricCause) {
  // The fabric's error alone cannot tell a peer that withdrew its registrations (the
  // store changed: on verbs the HCA refuses the Read and the target's QP fails too,
  // which may reach us as the peer's connection closing) from one that stopped or
  // died (which deregisters as it goes). The control connection can: a live peer
  // answers kOpStatus, a gone one does not.
  RequestMessage req{};
  req.op = kOpStatus;
  Status s = WireSend(fd_, &req, sizeof req, "expert peer " + peer_ + " status request");
  uint64_t payload = 0;
  if (s.ok()) s = ReadReply(fd_, peer_, &payload);
  if (s.ok() && payload != 0) s = ExpertError(ExpertErrc::kProtocol, "expert peer " + peer_ + " status reply with a payload");
  const ExpertErrc e = ExpertErrcOf(s);
  if (e == ExpertErrc::kStoreChanged) {
    return ExpertError(e, WithoutPrefix(s) + " (the read: " + WithoutPrefix(fabricCause) + ")");
  }
  if (e == ExpertErrc::kPeerLost) {
    // fabricCause is itself an expert error ("expert PEER_LOST: ..."): keep one prefix.
    std::string cause = fabricCause.message();
    const std::string prefix = std::string("expert ") + ExpertErrcName(ExpertErrcOf(fabricCause)) + ": ";
    if (cause.rfind(prefix, 0) == 0) cause.erase(0, prefix.size());
    return ExpertError(e, cause + "; its control connection is gone too (" + s.message() + ")");
  }
  // Still serving (or an older peer without kOpStatus): the fabric's cause stands.
  return fabricCause;
}

Status ExpertClient::Verify(std::span<const RecordRequest> batch) {
  const uint64_t stride = manifest_.recordStride;
  for (const RecordRequest& r : batch) {
    const uint64_t want = manifest_.layers[r.layer].checksums[r.expert];
    const uint64_t got = RecordChecksum(ArenaPtr(r.arenaOffset), stride);
    if (got != want) {
      return ExpertError(ExpertErrc::kChecksumMismatch, "layer " + std::to_string(manifest_.layers[r.layer].layer) +
                                                            " (index " + std::to_string(r.layer) + ") expert " +
                                                            std::to_string(r.expert) + ": xxh3-64 " + ChecksumHex(got) +
                                                            ", the manifest says " + ChecksumHex(want));
    }
  }
  return Status::Ok();
}

Status ExpertClient::Close() {
  if (closed_) return Status::Ok();
  closed_ = true;
  // After a sticky failure (already returned by the fetch that hit it) there is no
  // polite shutdown to send: close quietly rather than report that failure again.
  if (!failed_.ok() || fd_ < 0) return Status::Ok();
  RequestMessage req{};
  req.op = kOpShutdown;
  RY_RETURN_IF_ERROR(WireSend(fd_, &req, sizeof req, "expert peer " + peer_ + " shutdown"));
  uint64_t payload = 0;
  RY_RETURN_IF_ERROR(ReadReply(fd_, peer_, &payload));
  ::close(fd_);
  fd_ = -1;
  return Status::Ok();
}

}  // namespace railyard::expert
