#include "storage/snapshot/snapshot_client.h"

#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "storage/snapshot/control_socket.h"

namespace railyard::storage::snapshot {
namespace {

Status RecvBlock(int fd, uint32_t maxBytes, const char* what, std::vector<uint8_t>* out) {
  uint32_t n = 0;
  RY_RETURN_IF_ERROR(proxy::RecvAll(fd, &n, sizeof n, what));
  if (n > maxBytes) {
    return RemoteError(std::string("snapshot: peer sent a ") + what + " of " + std::to_string(n) + " bytes (at most " +
                       std::to_string(maxBytes) + ")");
  }
  out->resize(n);
  if (n > 0) RY_RETURN_IF_ERROR(proxy::RecvAll(fd, out->data(), n, what));
  return Status::Ok();
}

/// Reads the reply's 8-byte head; a refusal (status != 0) becomes InvalidUsage with
/// the peer's message, another magic or version a RemoteError.
Status RecvReplyHead(int fd, const std::string& peer) {
  uint8_t head[8];
  if (Status s = proxy::RecvAll(fd, head, sizeof head, "snapshot handshake reply from " + peer); !s.ok()) {
    if (s.message().find("timed out") != std::string::npos) {
      // Silence is not the limits' doing (new-user trial: it was blamed on them).
      return Status(s.code(), s.message() + ": a snapshot server answers a handshake at once, so the peer is frozen or "
                                            "overloaded, or this port is not a snapshot server's");
    }
    // A server at its connection limits closes a new connection unanswered (C API
    // trial: "Connection reset by peer" and nothing more).
    // (New-user trial: a port whose service closes at once was blamed on the limits only.)
    return Status(s.code(), s.message() + ": a snapshot server closes a connection unanswered when it already serves "
                                          "its most clients at once (256), or its most from this address (64; its "
                                          "log WARNs \"refused a client\" saying which), or this port's service is "
                                          "not a snapshot server");
  }
  uint32_t magic = 0;
  uint16_t version = 0, code = 0;
  std::memcpy(&magic, head, 4);
  std::memcpy(&version, head + 4, 2);
  std::memcpy(&code, head + 6, 2);
  if (magic == 0x58455952) {  // "RYEX": an expert store's hello (storage/expert/expert_wire.h), sent at accept
    return RemoteError("snapshot: " + peer + " is an expert store's port (it greeted with the expert tier's hello), "
                       "not a snapshot peer's");
  }
  if (magic != Reply::kMagic) return RemoteError("snapshot: " + peer + " is not a snapshot peer (bad reply magic)");
  if (code != 0) {
    std::vector<uint8_t> msg;
    RY_RETURN_IF_ERROR(RecvBlock(fd, Reply::kMaxMessageBytes, "refusal", &msg));
    return InvalidUsage("snapshot: " + peer + " refused the handshake: " + std::string(msg.begin(), msg.end()));
  }
  if (version != Header::kVersion) {
    return RemoteError("snapshot: " + peer + " replied with version " + std::to_string(version) + ", this client speaks " +
                       std::to_string(Header::kVersion));
  }
  return Status::Ok();
}

}  // namespace

Status ListArenas(const std::string& host, uint16_t port, int timeoutMs, std::vector<ArenaInfo>* out,
                  const std::string& peerName) {
  const std::string peer = peerName.empty() ? host + ":" + std::to_string(port) : peerName;
  proxy::Fd fd;
  if (Status s = ConnectControl(host, port, timeoutMs, &fd); !s.ok()) {
    return peerName.empty() ? s : Status(s.code(), "snapshot: " + peer + ": " + s.message());
  }
  Header h;
  h.mode = Mode::kList;
  auto hb = h.Encode();
  iovec iov{hb.data(), hb.size()};
  RY_RETURN_IF_ERROR(proxy::SendAll(fd.get(), &iov, 1, "snapshot list request"));
  RY_RETURN_IF_ERROR(RecvReplyHead(fd.get(), peer));
  uint32_t count = 0;
  RY_RETURN_IF_ERROR(proxy::RecvAll(fd.get(), &count, sizeof count, "snapshot arena list"));
  if (count == 0 || count > ArenaInfo::kMaxArenas) {
    return RemoteError("snapshot: " + peer + " lists " + std::to_string(count) + " arenas (1.." +
                       std::to_string(ArenaInfo::kMaxArenas) + ")");
  }
  std::vector<ArenaInfo> list;
  for (uint32_t i = 0; i < count; ++i) {
    std::array<uint8_t, ArenaInfo::kBytes> e{};
    RY_RETURN_IF_ERROR(proxy::RecvAll(fd.get(), e.data(), e.size(), "snapshot arena list"));
    ArenaInfo a;
    if (Status s = ArenaInfo::Decode(e, &a); !s.ok()) return RemoteError("snapshot: " + peer + ": " + s.message());
    for (const ArenaInfo& b : list) {
      if (b.kind == a.kind) return RemoteError("snapshot: " + peer + " lists kind '" + a.kind + "' twice");
    }
    list.push_back(std::move(a));
  }
  *out = std::move(list);
  return Status::Ok();
}

Status SnapshotClient::Connect(fabric::RegistrationCache& cache, fabric::Worker& worker, const ClientOptions& options,
                               std::unique_ptr<SnapshotClient>* out) {
  if (options.mode != Mode::kRaw && options.mode != Mode::kPaging) {
    return InvalidArgument("snapshot: connect with mode " + ModeName(options.mode) + " (raw or paging; ListArenas lists)");
  }
  if (!ValidKind(options.kind)) return InvalidArgument("snapshot: kind '" + options.kind + "' must be 1..31 bytes of [A-Za-z0-9_.-]");
  if (options.blobBytes == 0 || options.arenaBytes == 0 || options.arenaBytes % options.blobBytes != 0) {
    return InvalidArgument("snapshot: arena bytes " + std::to_string(options.arenaBytes) +
                           " must be a non-zero multiple of blob bytes " + std::to_string(options.blobBytes));
  }
  std::unique_ptr<SnapshotClient> c(new SnapshotClient(worker, options));
  RY_RETURN_IF_ERROR(BlobMover::Create(cache, worker, options.mover, &c->mover_));
  const std::string peer =
      options.peerName.empty() ? options.host + ":" + std::to_string(options.port) : options.peerName;
  if (Status s = ConnectControl(options.host, options.port, options.timeoutMs, &c->control_); !s.ok()) {
    if (options.peerName.empty()) return s;
    return Status(s.code(), "snapshot: " + peer + ": " + s.message());
  }
  const std::vector<uint8_t> address = worker.Address();
  Header h;
  h.mode = options.mode;
  h.kind = options.kind;
  h.arenaBytes = options.arenaBytes;
  h.blobBytes = options.blobBytes;
  h.addressBytes = static_cast<uint32_t>(address.size());
  h.timeoutMs = static_cast<uint32_t>(std::max(options.timeoutMs, 0));  // the peer says kQueued often enough for it
  auto hb = h.Encode();
  iovec iov[2] = {{hb.data(), hb.size()}, {const_cast<uint8_t*>(address.data()), address.size()}};
  const int fd = c->control_.get();
  RY_RETURN_IF_ERROR(proxy::SendAll(fd, iov, 2, "snapshot handshake to " + peer));
  RY_RETURN_IF_ERROR(RecvReplyHead(fd, peer));
  std::vector<uint8_t> peerAddress, key;
  RY_RETURN_IF_ERROR(RecvBlock(fd, Header::kMaxAddressBytes, "worker address", &peerAddress));
  RY_RETURN_IF_ERROR(RecvBlock(fd, Reply::kMaxKeyBytes, "arena key", &key));
  RY_RETURN_IF_ERROR(proxy::RecvAll(fd, &c->slotWaitMs_, sizeof c->slotWaitMs_, "snapshot slot wait from " + peer));
  if (c->slotWaitMs_ > Reply::kMaxSlotWaitMs) {
    return RemoteError("snapshot: " + peer + " gave a slot wait of " + std::to_string(c->slotWaitMs_) +
                       " ms, more than any peer's RAILYARD_TIMEOUT_MS allows (" +
                       std::to_string(Reply::kMaxSlotWaitMs) + " ms)");
  }
  c->lastAnswer_ = std::chrono::steady_clock::now();
  if (Status s = fabric::RemoteKey::Unpack(key, &c->arenaKey_); !s.ok()) {
    return RemoteError("snapshot: " + peer + " sent a bad arena key: " + s.message());
  }
  if (c->arenaKey_.length != options.arenaBytes) {
    return RemoteError("snapshot: " + peer + "'s arena key covers " + std::to_string(c->arenaKey_.length) +
                       " bytes, not the " + std::to_string(options.arenaBytes) + " agreed");
  }
  RY_RETURN_IF_ERROR(worker.Connect(peerAddress, &c->ep_));
  // The fabric connection is brought up now, not at the first put or get: this
  // client's Worker moves only while a call runs, and a peer's listener closes a
  // connection whose first frames do not come within its RAILYARD_ACCEPT_TIMEOUT_MS
  // (new-user trial: a handle opened and first used 12 s later, or whose first put
  // queued that long for a slot, failed "Broken pipe").
  if (Status s = c->mover_->Probe(*c->ep_, c->arenaKey_, c->arenaKey_.base); !s.ok()) {
    return Status(s.code(), "snapshot: " + peer + ": the fabric connection to the arena failed: " + s.message());
  }
  *out = std::move(c);
  return Status::Ok();
}

SnapshotClient::~SnapshotClient() {
  ep_.reset();  // before the mover's staging is released
}

Status SnapshotClient::Sticky(Status s) {
  if (!s.ok() && failed_.ok() && (s.code() == Code::kSystemError || s.code() == Code::kRemoteError)) failed_ = s;
  return s;
}

Status SnapshotClient::CheckBlob(uint64_t bytes, const char* what) const {
  if (bytes != options_.blobBytes) {
    return InvalidArgument(std::string("snapshot ") + what + ": a blob of " + std::to_string(bytes) +
                           " bytes; kind '" + options_.kind + "' holds blobs of " + std::to_string(options_.blobBytes) +
                           " bytes (nothing was sent)");
  }
  return Earlier();
}

Status SnapshotClient::Earlier() const {
  if (failed_.ok()) return failed_;
  return Status(failed_.code(), "snapshot: this handle's connection to the peer failed earlier (" +
                                    failed_.message() + "); nothing was sent: open a new handle");
}

Status SnapshotClient::WithRouteCause(Status s, std::chrono::steady_clock::time_point began) {
  if (s.ok() || !ep_) return s;
  // The control connection broke. When it runs over the same route as the data (a
  // relayed peer: storage/tunnel), the fabric Endpoint has the named cause (peer,
  // relay, sequence): give it a moment to see it (a killed relay shows at once), but
  // never past the call's RAILYARD_TIMEOUT_MS (new-user trial: a silent peer's call
  // took the timeout plus 1 s).
  std::vector<fabric::Event> events;
  const auto deadline = std::min(began + std::chrono::milliseconds(options_.timeoutMs),
                                 std::chrono::steady_clock::now() + std::chrono::milliseconds(1000));
  do {
    events.clear();
    if (worker_.Progress(&events) == 0 && ep_->status().ok()) std::this_thread::sleep_for(std::chrono::microseconds(200));
  } while (ep_->status().ok() && std::chrono::steady_clock::now() < deadline);
  if (ep_->status().ok()) return s;
  return Status(s.code(), s.message() + "; the fabric route to the peer failed too: " + ep_->status().message());
}

Status SnapshotClient::WithDropCause(Status s) const {
  if (s.ok()) return s;
  // This handle's own arena key refused: the peer revoked it, as it does when it drops
  // the client (or it restarted). A network error then, whichever path met it first (C
  // API trial: the same lost put came back as 2 or 6 by which of the close and the
  // revoked key it met, sometimes with no word of why).
  // (Over verbs the deregistered MR is the HCA's remote access error.)
  const bool revoked = s.message().find("fabric BAD_KEY") != std::string::npos ||
                       s.message().find("fabric DEREGISTERED") != std::string::npos ||
                       s.message().find("fabric REMOTE_ACCESS") != std::string::npos;
  const Status unexplained = revoked ? Status(Code::kSystemError,
                                              s.message() + "; the peer no longer honours this handle's arena key: "
                                                            "it revokes it when it drops this client (one that stops "
                                                            "for its RAILYARD_TIMEOUT_MS in the middle of a call) or "
                                                            "when it restarts")
                                     : s;
  if (staged_.empty()) {
    const std::string& m = s.message();
    const bool closed = !revoked && (m.find("closed by peer") != std::string::npos ||
                                     m.find(std::strerror(ECONNRESET)) != std::string::npos ||
                                     m.find(std::strerror(EPIPE)) != std::string::npos);
    if (!closed) return unexplained;
    return Status(s.code(), m + "; the peer closed this connection: it stopped or restarted, or, serving its most "
                                "clients at once, gave the seat of this handle, idle between calls, to a client from "
                                "another address (its log WARNs \"closed an idle one\"); open a new handle");
  }
  // Blamed only on a pause of at least half the peer's timeout (half its slot wait)
  // since its last answer: a peer that closed sooner stopped or restarted. (Not the
  // whole timeout: the peer counts it from before its answer reached this client.)
  const uint64_t peerTimeoutMs = slotWaitMs_ / 2;  // at most INT32_MAX: Connect refused more
  const auto paused = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - lastAnswer_);
  if (paused < std::chrono::milliseconds(peerTimeoutMs / 2)) return unexplained;
  // Did the peer close the connection (an end of stream or a reset waiting), rather
  // than go silent? It revokes a dropped client's key just before it closes, so a
  // write that met the revoked key gives the close a moment (at most 200 ms) to come.
  pollfd p{control_.get(), POLLIN | POLLRDHUP, 0};
  int ready = 0;
  do {
    ready = ::poll(&p, 1, 200);
  } while (ready < 0 && errno == EINTR);
  char byte = 0;
  const ssize_t n = ready > 0 ? ::recv(control_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) : -1;
  if (!(n == 0 || (n < 0 && errno == ECONNRESET))) return unexplained;
  std::string keys;
  for (uint64_t k : staged_) keys += (keys.empty() ? "" : ", ") + std::to_string(k);
  return Status(Code::kSystemError,
                s.message() + "; the peer closed the connection while this handle held key " + keys +
                    " allocated and not committed, and had sent it nothing for " + std::to_string(paused.count()) +
                    " ms: a peer drops a client that stops for its RAILYARD_TIMEOUT_MS (" +
                    std::to_string(peerTimeoutMs) +
                    " ms) in the middle of a put and gives its slots to others (commit sooner after the alloc, or "
                    "raise the peer's RAILYARD_TIMEOUT_MS)");
}

std::string SnapshotClient::CallName(Op op, uint64_t key) const {
  return std::string("snapshot ") + OpName(op) + " of key " + std::to_string(key) +
         (options_.peerName.empty() ? "" : " to " + options_.peerName);
}

Status SnapshotClient::RecvResponse(const std::string& what, std::chrono::steady_clock::time_point began,
                                    Response* out) {
  const int fd = control_.get();
  std::array<uint8_t, Response::kBytes> rb{};
  RY_RETURN_IF_ERROR(Sticky(WithDropCause(WithRouteCause(proxy::RecvAll(fd, rb.data(), rb.size(), what), began))));
  uint32_t n = 0;
  if (Status s = Response::DecodeFixed(rb, out, &n); !s.ok()) return Sticky(RemoteError(what + ": " + s.message()));
  out->message.resize(n);
  if (n > 0) RY_RETURN_IF_ERROR(Sticky(WithRouteCause(proxy::RecvAll(fd, out->message.data(), n, what), began)));
  lastAnswer_ = std::chrono::steady_clock::now();
  if (out->result == Response::kError) {
    return Status(static_cast<Code>(out->code), what + ": the peer says: " + out->message);
  }
  return Status::Ok();
}

Status SnapshotClient::SendRequest(Op op, uint64_t key, uint64_t checksum) {
  Request q;
  q.op = op;
  q.key = key;
  q.checksum = checksum;
  auto qb = q.Encode();
  iovec iov{qb.data(), qb.size()};
  return Sticky(WithDropCause(WithRouteCause(proxy::SendAll(control_.get(), &iov, 1, CallName(op, key)),
                                             std::chrono::steady_clock::now())));
}

Status SnapshotClient::Answer(Op op, uint64_t key, Response* out) {
  const std::string what = CallName(op, key);
  const auto began = std::chrono::steady_clock::now();
  RY_RETURN_IF_ERROR(RecvResponse(what, began, out));
  // An alloc or a get queued at the peer for a slot, and any request but a release
  // waiting there for a get's fault of its key (wire version 7), hears kQueued now and
  // then before its answer: each within this client's timeout from a live peer. Taken
  // for as long as the peer said it may queue a request (a fault waits for a slot at
  // most that long, then reads one blob), and this client's timeout on top (Connect
  // refused a slot wait above Reply::kMaxSlotWaitMs, about 50 days: no overflow).
  if (out->result == Response::kQueued && op != Op::kRelease) {
    const auto limit = began + std::chrono::milliseconds(slotWaitMs_) +  // at most Reply::kMaxSlotWaitMs
                       std::chrono::milliseconds(options_.timeoutMs);
    while (out->result == Response::kQueued) {
      if (std::chrono::steady_clock::now() > limit) {
        const char* forWhat = op == Op::kAlloc ? "for a slot"
                              : op == Op::kGet ? "for a slot or another get's fault of the key"
                                               : "for a get's fault of the key";
        return Sticky(RemoteError(what + ": the peer kept it queued " + forWhat + " past the " +
                                  std::to_string(slotWaitMs_) + " ms it said it may, and this client's " +
                                  std::to_string(options_.timeoutMs) + " ms on top"));
      }
      ++queuedAnswers_;
      RY_RETURN_IF_ERROR(RecvResponse(what, std::chrono::steady_clock::now(), out));
    }
  }
  // (A kQueued cannot be left here: the loop above took every one, and a release,
  // the one request it skips, has no answer to read.)
  if (out->result == Response::kReady || (out->result == Response::kFaulting && op != Op::kGet) ||
      (out->result == Response::kBusy && op != Op::kGet && op != Op::kAlloc)) {
    const char* name = out->result == Response::kReady  ? "ready"
                       : out->result == Response::kBusy ? "busy"
                                                        : "faulting";
    return Sticky(RemoteError(what + ": the peer answered '" + name + "' out of turn"));
  }
  if (op != Op::kGet && op != Op::kRemove && out->result == Response::kAbsent) {
    return Sticky(RemoteError(what + ": the peer answered 'absent'"));
  }
  if ((op == Op::kAlloc || op == Op::kGet) && (out->result == Response::kOk || out->result == Response::kFaulting) &&
      (out->offset % options_.blobBytes != 0 || out->offset > options_.arenaBytes - options_.blobBytes)) {
    return Sticky(RemoteError(what + ": the peer gave offset " + std::to_string(out->offset) +
                              ", not a slot of the arena"));
  }
  return Status::Ok();
}

Status SnapshotClient::Call(Op op, uint64_t key, uint64_t checksum, Response* out) {
  RY_RETURN_IF_ERROR(SendRequest(op, key, checksum));
  RY_RETURN_IF_ERROR(Answer(op, key, out));
  if (out->result == Response::kBusy) return Status(Code::kInvalidUsage, CallName(op, key) + ": " + BusyWhileStaged(op).message());
  return Status::Ok();
}

Status SnapshotClient::BusyWhileStaged(Op op) const {
  // Only a client holding a slot or pin is answered busy; asked with nothing else of
  // its own in flight, it holds one from an Alloc not committed (Put and Get alone
  // never hold one while they ask).
  std::string keys;
  for (uint64_t k : staged_) keys += (keys.empty() ? "" : ", ") + std::to_string(k);
  return InvalidUsage(std::string("no arena slot is free for this ") + OpName(op) +
                      " and this handle holds one already (an alloc not yet committed" +
                      (keys.empty() ? std::string() : ": key " + keys) +
                      "): commit it first, or give the arena more slots (nothing was taken)");
}

Status SnapshotClient::FailHandle(Status s) {
  if (!s.ok() && failed_.ok()) failed_ = s;
  return s;
}

Status SnapshotClient::SendRelease(uint64_t key) { return SendRequest(Op::kRelease, key, 0); }

Status SnapshotClient::WriteAt(uint64_t offset, const void* src, uint64_t bytes) {
  if (options_.mode != Mode::kRaw) return InvalidUsage("snapshot: WriteAt on paging kind '" + options_.kind + "' (use Put)");
  RY_RETURN_IF_ERROR(CheckBlob(bytes, "write"));
  if (offset % options_.blobBytes != 0 || offset > options_.arenaBytes - bytes) {
    return InvalidArgument("snapshot write: offset " + std::to_string(offset) + " is not a blob slot of the " +
                           std::to_string(options_.arenaBytes) + "-byte arena (a multiple of " +
                           std::to_string(options_.blobBytes) + " below it); nothing was written");
  }
  return Sticky(mover_->Put(*ep_, arenaKey_, arenaKey_.base + offset, src, bytes, nullptr));
}

Status SnapshotClient::ReadAt(uint64_t offset, void* dst, uint64_t bytes) {
  if (options_.mode != Mode::kRaw) return InvalidUsage("snapshot: ReadAt on paging kind '" + options_.kind + "' (use Get)");
  RY_RETURN_IF_ERROR(CheckBlob(bytes, "read"));
  if (offset % options_.blobBytes != 0 || offset > options_.arenaBytes - bytes) {
    return InvalidArgument("snapshot read: offset " + std::to_string(offset) + " is not a blob slot of the " +
                           std::to_string(options_.arenaBytes) + "-byte arena (a multiple of " +
                           std::to_string(options_.blobBytes) + " below it)");
  }
  return Sticky(mover_->Get(*ep_, arenaKey_, arenaKey_.base + offset, dst, bytes, nullptr));
}

Status SnapshotClient::Alloc(uint64_t key, uint64_t* offset) {
  if (options_.mode != Mode::kPaging) return InvalidUsage("snapshot: Put on raw kind '" + options_.kind + "' (use WriteAt)");
  RY_RETURN_IF_ERROR(Earlier());
  Response r;
  RY_RETURN_IF_ERROR(Call(Op::kAlloc, key, 0, &r));
  *offset = r.offset;
  // An alloc of a key already staged gets that same slot from the peer: one entry a key.
  if (std::find(staged_.begin(), staged_.end(), key) == staged_.end()) staged_.push_back(key);
  return Status::Ok();
}

Status SnapshotClient::WriteSlot(uint64_t offset, const void* src, uint64_t bytes, uint64_t* checksum) {
  if (options_.mode != Mode::kPaging) return InvalidUsage("snapshot: Put on raw kind '" + options_.kind + "' (use WriteAt)");
  RY_RETURN_IF_ERROR(CheckBlob(bytes, "put"));
  if (offset % options_.blobBytes != 0 || offset > options_.arenaBytes - bytes) {
    return InvalidArgument("snapshot put: offset " + std::to_string(offset) + " is not a slot of the arena");
  }
  // Any failure here fails the handle: the slot stays allocated at the peer until the
  // connection closes (an uncommitted slot is reclaimed then), so this handle must not
  // go on as if it held nothing.
  // A client that stopped between its alloc and this write for the peer's timeout finds
  // its key revoked (the fabric says BAD_KEY): WithDropCause says why.
  return FailHandle(WithDropCause(mover_->Put(*ep_, arenaKey_, arenaKey_.base + offset, src, bytes, checksum)));
}

Status SnapshotClient::Stage(uint64_t key, const void* src, uint64_t bytes, uint64_t* checksum) {
  if (options_.mode != Mode::kPaging) return InvalidUsage("snapshot: Put on raw kind '" + options_.kind + "' (use WriteAt)");
  RY_RETURN_IF_ERROR(CheckBlob(bytes, "put"));
  uint64_t offset = 0;
  RY_RETURN_IF_ERROR(Alloc(key, &offset));
  return NamedWrite(key, WriteSlot(offset, src, bytes, checksum));
}

Status SnapshotClient::NamedWrite(uint64_t key, Status written) const {
  // New-user trial: a relay killed under a put said only the fabric's error, no call or key.
  if (written.ok() || written.message().rfind("snapshot ", 0) == 0) return written;
  return Status(written.code(), "snapshot put of key " + std::to_string(key) +
                                    (options_.peerName.empty() ? "" : " to " + options_.peerName) +
                                    ": writing the blob: " + written.message());
}

Status SnapshotClient::Commit(uint64_t key, uint64_t checksum) {
  Response r;
  // A handle that failed earlier sends nothing more, as Alloc, Get and Remove (review).
  Status s = Earlier();
  if (s.ok()) s = Call(Op::kCommit, key, checksum, &r);
  // Answered either way, the peer holds no slot of `key` for this client any more (a
  // refused commit frees it); a failed connection frees everything there.
  staged_.erase(std::remove(staged_.begin(), staged_.end(), key), staged_.end());
  return s;
}

Status SnapshotClient::Put(uint64_t key, const void* src, uint64_t bytes) {
  uint64_t sum = 0;
  RY_RETURN_IF_ERROR(Stage(key, src, bytes, &sum));
  return Commit(key, sum);
}

Status SnapshotClient::Get(uint64_t key, void* dst, uint64_t bytes, bool* found) {
  if (options_.mode != Mode::kPaging) return InvalidUsage("snapshot: Get on raw kind '" + options_.kind + "' (use ReadAt)");
  RY_RETURN_IF_ERROR(CheckBlob(bytes, "get"));
  Response r;
  RY_RETURN_IF_ERROR(Call(Op::kGet, key, 0, &r));
  *found = r.result != Response::kAbsent;
  if (!*found) return Status::Ok();
  return ReadBlob(key, r, dst, bytes);
}

Status SnapshotClient::ReadBlob(uint64_t key, const Response& r, void* dst, uint64_t bytes) {
  // A blob faulted from the peer's swap file is read as its pieces land there: the
  // gate takes the peer's kReady records (waiting only when nothing is in flight).
  BlobMover::ReadyGate gate;
  Status faultFailed;  // the peer's kError ending the fault: the connection stays in step
  if (r.result == Response::kFaulting) {
    ++faultedGets_;
    const std::string what = CallName(Op::kGet, key);
    const auto began = std::chrono::steady_clock::now();
    gate = [this, what, began, announced = uint64_t{0}, &faultFailed](bool wait, uint64_t* ready) mutable -> Status {
      if (!wait) {
        int queued = 0;
        if (::ioctl(control_.get(), FIONREAD, &queued) != 0 || queued < static_cast<int>(Response::kBytes)) {
          *ready = announced;
          return Status::Ok();
        }
      }
      Response m;
      if (Status st = RecvResponse(what, began, &m); !st.ok()) {
        if (m.result == Response::kError) faultFailed = st;
        return st;
      }
      if (m.result != Response::kReady) {
        return Sticky(RemoteError(what + ": the peer answered result " + std::to_string(m.result) +
                                  " while the blob was faulted (ready or error expected)"));
      }
      RY_RETURN_IF_ERROR(Sticky(CheckReady(announced, m.offset, options_.blobBytes)));
      ++readyRecords_;
      announced = m.offset;
      *ready = announced;
      return Status::Ok();
    };
  }
  uint64_t sum = 0;
  Status moved = mover_->Get(*ep_, arenaKey_, arenaKey_.base + r.offset, dst, bytes, &sum, gate);
  if (!faultFailed.ok()) return faultFailed;  // nothing pinned at the peer: no release
  // Any other failure fails the handle: the pin (and, for a fault, the peer's records
  // still unread) would leave this connection out of step with the peer.
  if (!moved.ok()) return FailHandle(WithDropCause(Status(moved.code(), CallName(Op::kGet, key) + ": " + moved.message())));
  // No round trip: the peer takes the release before this client's next request.
  RY_RETURN_IF_ERROR(SendRelease(key));
  if (sum != r.checksum) {
    return RemoteError("snapshot get of key " + std::to_string(key) +
                       ": the bytes read do not match the blob's checksum (not served)");
  }
  return Status::Ok();
}

Status SnapshotClient::Remove(uint64_t key, bool* found) {
  if (options_.mode != Mode::kPaging) return InvalidUsage("snapshot: Remove on raw kind '" + options_.kind + "'");
  RY_RETURN_IF_ERROR(Earlier());
  Response r;
  RY_RETURN_IF_ERROR(Call(Op::kRemove, key, 0, &r));
  *found = r.result == Response::kOk;
  return Status::Ok();
}

bool SnapshotClient::ControlClosedByPeer() const {
  if (!control_.valid()) return false;
  char byte = 0;
  const ssize_t n = ::recv(control_.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

}  // namespace railyard::storage::snapshot
