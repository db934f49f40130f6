#include "storage/snapshot/snapshot_wire.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace railyard::storage::snapshot {
namespace {

template <typename T>
void Put(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof v);  // little-endian hosts only (see file comment)
}
template <typename T>
T Get(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool KnownCode(uint32_t c) {
  switch (static_cast<Code>(c)) {
    case Code::kOk:
    case Code::kSystemError:
    case Code::kInternalError:
    case Code::kInvalidArgument:
    case Code::kInvalidUsage:
    case Code::kRemoteError:
      return true;
  }
  return false;
}

}  // namespace

std::string ModeName(Mode mode) {
  switch (mode) {
    case Mode::kRaw:
      return "raw";
    case Mode::kPaging:
      return "paging";
    case Mode::kList:
      return "list";
  }
  return "mode " + std::to_string(static_cast<int>(mode));
}

bool ValidKind(const std::string& kind) {
  if (kind.empty() || kind.size() > Header::kMaxKindBytes) return false;
  for (char c : kind) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::array<uint8_t, Header::kBytes> Header::Encode() const {
  std::array<uint8_t, kBytes> b{};
  Put<uint32_t>(&b[0], kMagic);
  Put<uint16_t>(&b[4], version);
  b[6] = static_cast<uint8_t>(mode);
  std::memcpy(&b[8], kind.data(), std::min(kind.size(), kMaxKindBytes));
  Put<uint64_t>(&b[40], arenaBytes);
  Put<uint64_t>(&b[48], blobBytes);
  Put<uint32_t>(&b[56], addressBytes);
  Put<uint32_t>(&b[60], timeoutMs);
  return b;
}

Status Header::CheckMagic(std::span<const uint8_t, 4> b) {
  const uint32_t magic = Get<uint32_t>(&b[0]);
  if (magic == kMagic) return Status::Ok();
  char t[16];
  std::snprintf(t, sizeof t, "%08x", magic);
  // An expert-tier client speaks first with its transport choice: 1 (tcp) or 2 (read),
  // then zeros (storage/expert/expert_wire.h, ChooseMessage).
  const bool expertChoice = (b[0] == 1 || b[0] == 2) && b[1] == 0 && b[2] == 0 && b[3] == 0;
  return InvalidArgument(std::string("snapshot handshake: bad magic 0x") + t + " (want \"RYSN\"): " +
                         (expertChoice ? "an expert-tier client (this port serves snapshot arenas, not an expert store)"
                                       : "not a snapshot client"));
}

Status Header::Decode(std::span<const uint8_t, kBytes> b, Header* out) {
  RY_RETURN_IF_ERROR(CheckMagic(b.first<4>()));
  Header h;
  h.version = Get<uint16_t>(&b[4]);
  if (h.version != kVersion) {
    return InvalidArgument("snapshot handshake: version " + std::to_string(h.version) + " differs from this peer's " +
                           std::to_string(kVersion));
  }
  const uint8_t mode = b[6];
  if (mode != static_cast<uint8_t>(Mode::kRaw) && mode != static_cast<uint8_t>(Mode::kPaging) &&
      mode != static_cast<uint8_t>(Mode::kList)) {
    return InvalidArgument("snapshot handshake: unknown mode " + std::to_string(mode) +
                           " (1 = raw, 2 = paging, 3 = list)");
  }
  h.mode = static_cast<Mode>(mode);
  if (b[7] != 0) return InvalidArgument("snapshot handshake: reserved byte 7 is not zero");
  h.timeoutMs = Get<uint32_t>(&b[60]);  // any value: QueuedBeatMs bounds what it can do
  if (h.mode == Mode::kList) {
    for (size_t i = 8; i < 60; ++i) {
      if (b[i] != 0) return InvalidArgument("snapshot handshake: a list request carries no kind, sizes or address");
    }
    *out = std::move(h);
    return Status::Ok();
  }
  size_t n = 0;
  while (n < 32 && b[8 + n] != 0) ++n;
  for (size_t i = n; i < 32; ++i) {
    if (b[8 + i] != 0) return InvalidArgument("snapshot handshake: kind is not NUL-padded");
  }
  h.kind.assign(reinterpret_cast<const char*>(&b[8]), n);
  if (!ValidKind(h.kind)) {
    return InvalidArgument("snapshot handshake: kind must be 1.." + std::to_string(kMaxKindBytes) +
                           " bytes of [A-Za-z0-9_.-]");
  }
  h.arenaBytes = Get<uint64_t>(&b[40]);
  h.blobBytes = Get<uint64_t>(&b[48]);
  if (h.blobBytes == 0) return InvalidArgument("snapshot handshake: blob bytes is 0");
  if (h.arenaBytes == 0 || h.arenaBytes % h.blobBytes != 0) {
    return InvalidArgument("snapshot handshake: arena bytes " + std::to_string(h.arenaBytes) +
                           " is not a non-zero multiple of blob bytes " + std::to_string(h.blobBytes));
  }
  h.addressBytes = Get<uint32_t>(&b[56]);
  if (h.addressBytes == 0 || h.addressBytes > kMaxAddressBytes) {
    return InvalidArgument("snapshot handshake: worker address of " + std::to_string(h.addressBytes) +
                           " bytes (1.." + std::to_string(kMaxAddressBytes) + ")");
  }
  *out = std::move(h);
  return Status::Ok();
}

std::vector<uint8_t> Reply::Encode() const {
  std::vector<uint8_t> b(8);
  Put<uint32_t>(&b[0], kMagic);
  Put<uint16_t>(&b[4], Header::kVersion);
  Put<uint16_t>(&b[6], static_cast<uint16_t>(status.code()));
  auto append = [&](const void* p, size_t n) {
    uint8_t len[4];
    Put<uint32_t>(len, static_cast<uint32_t>(n));
    b.insert(b.end(), len, len + 4);
    b.insert(b.end(), static_cast<const uint8_t*>(p), static_cast<const uint8_t*>(p) + n);
  };
  if (!status.ok()) {
    const std::string& m = status.message();
    append(m.data(), std::min<size_t>(m.size(), kMaxMessageBytes));
  } else {
    append(workerAddress.data(), workerAddress.size());
    append(arenaKey.data(), arenaKey.size());
    uint8_t wait[8];
    Put<uint64_t>(wait, slotWaitMs);
    b.insert(b.end(), wait, wait + 8);
  }
  return b;
}

std::array<uint8_t, ArenaInfo::kBytes> ArenaInfo::Encode() const {
  std::array<uint8_t, kBytes> b{};
  std::memcpy(&b[0], kind.data(), std::min(kind.size(), Header::kMaxKindBytes));
  b[32] = static_cast<uint8_t>(mode);
  Put<uint64_t>(&b[40], blobBytes);
  Put<uint64_t>(&b[48], arenaBytes);
  Put<uint64_t>(&b[56], maxBytes);
  return b;
}

Status ArenaInfo::Decode(std::span<const uint8_t, kBytes> b, ArenaInfo* out) {
  ArenaInfo a;
  size_t n = 0;
  while (n < 32 && b[n] != 0) ++n;
  for (size_t i = n; i < 32; ++i) {
    if (b[i] != 0) return InvalidArgument("snapshot arena list: kind is not NUL-padded");
  }
  a.kind.assign(reinterpret_cast<const char*>(&b[0]), n);
  if (!ValidKind(a.kind)) return InvalidArgument("snapshot arena list: kind must be 1..31 bytes of [A-Za-z0-9_.-]");
  if (b[32] != static_cast<uint8_t>(Mode::kRaw) && b[32] != static_cast<uint8_t>(Mode::kPaging)) {
    return InvalidArgument("snapshot arena list: kind '" + a.kind + "' has unknown mode " + std::to_string(b[32]));
  }
  a.mode = static_cast<Mode>(b[32]);
  for (size_t i = 33; i < 40; ++i) {
    if (b[i] != 0) return InvalidArgument("snapshot arena list: reserved bytes are not zero");
  }
  a.blobBytes = Get<uint64_t>(&b[40]);
  a.arenaBytes = Get<uint64_t>(&b[48]);
  a.maxBytes = Get<uint64_t>(&b[56]);
  const std::string who = "snapshot arena list: kind '" + a.kind + "': ";
  if (a.blobBytes == 0) return InvalidArgument(who + "blob bytes is 0");
  if (a.arenaBytes % a.blobBytes != 0) {
    return InvalidArgument(who + "arena bytes " + std::to_string(a.arenaBytes) + " is not a multiple of blob bytes " +
                           std::to_string(a.blobBytes));
  }
  if (a.arenaBytes == 0 && (a.mode != Mode::kRaw || a.maxBytes < a.blobBytes)) {
    return InvalidArgument(who + "an unsized arena must be raw with a max of at least one blob");
  }
  *out = std::move(a);
  return Status::Ok();
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kAlloc:
      return "alloc";
    case Op::kCommit:
      return "commit";
    case Op::kGet:
      return "get";
    case Op::kRelease:
      return "release";
    case Op::kRemove:
      return "remove";
  }
  return "unknown";
}

std::array<uint8_t, Request::kBytes> Request::Encode() const {
  std::array<uint8_t, kBytes> b{};
  Put<uint32_t>(&b[0], static_cast<uint32_t>(op));
  Put<uint64_t>(&b[8], key);
  Put<uint64_t>(&b[16], checksum);
  return b;
}

Status Request::Decode(std::span<const uint8_t, kBytes> b, Request* out) {
  const uint32_t op = Get<uint32_t>(&b[0]);
  if (op < 1 || op > 5) return InvalidArgument("snapshot request: unknown op " + std::to_string(op));
  if (Get<uint32_t>(&b[4]) != 0 || Get<uint64_t>(&b[24]) != 0) {
    return InvalidArgument("snapshot request: reserved bytes are not zero");
  }
  out->op = static_cast<Op>(op);
  out->key = Get<uint64_t>(&b[8]);
  out->checksum = Get<uint64_t>(&b[16]);
  return Status::Ok();
}

std::vector<uint8_t> Response::Encode() const {
  const uint32_t n = static_cast<uint32_t>(std::min<size_t>(message.size(), Reply::kMaxMessageBytes));
  std::vector<uint8_t> b(kBytes + n);
  Put<uint32_t>(&b[0], result);
  Put<uint32_t>(&b[4], code);
  Put<uint64_t>(&b[8], offset);
  Put<uint64_t>(&b[16], checksum);
  Put<uint32_t>(&b[24], n);
  std::memcpy(b.data() + kBytes, message.data(), n);
  return b;
}

Status Response::DecodeFixed(std::span<const uint8_t, kBytes> b, Response* out, uint32_t* messageBytes) {
  const uint32_t result = Get<uint32_t>(&b[0]);
  if (result > kQueued) return InvalidArgument("snapshot response: unknown result " + std::to_string(result));
  const uint32_t code = Get<uint32_t>(&b[4]);
  if (!KnownCode(code) || (result == kError) == (code == 0)) {
    return InvalidArgument("snapshot response: code " + std::to_string(code) + " does not fit result " +
                           std::to_string(result));
  }
  const uint32_t n = Get<uint32_t>(&b[24]);
  if (n > Reply::kMaxMessageBytes) return InvalidArgument("snapshot response: message of " + std::to_string(n) + " bytes");
  if (Get<uint32_t>(&b[28]) != 0) return InvalidArgument("snapshot response: reserved bytes are not zero");
  if (result == kReady && (n != 0 || Get<uint64_t>(&b[16]) != 0)) {
    return InvalidArgument("snapshot response: a ready record with a checksum or a message");
  }
  if ((result == kBusy || result == kQueued) && (n != 0 || Get<uint64_t>(&b[8]) != 0 || Get<uint64_t>(&b[16]) != 0)) {
    return InvalidArgument(std::string("snapshot response: a ") + (result == kBusy ? "busy" : "queued") +
                           " answer with an offset, a checksum or a message");
  }
  out->result = static_cast<Result>(result);
  out->code = code;
  out->offset = Get<uint64_t>(&b[8]);
  out->checksum = Get<uint64_t>(&b[16]);
  *messageBytes = n;
  return Status::Ok();
}

int64_t QueuedBeatMs(int64_t peerTimeoutMs, uint32_t clientTimeoutMs) {
  const int64_t shorter = clientTimeoutMs == 0 ? peerTimeoutMs : std::min<int64_t>(peerTimeoutMs, clientTimeoutMs);
  return std::clamp<int64_t>(shorter / 4, kMinQueuedBeatMs, 1000);
}

Status CheckReady(uint64_t before, uint64_t ready, uint64_t blobBytes) {
  if (ready <= before || ready > blobBytes) {
    return RemoteError("snapshot get: the peer said " + std::to_string(ready) + " bytes of the " +
                       std::to_string(blobBytes) + "-byte blob are ready, after " + std::to_string(before) +
                       " (it must grow, up to the blob)");
  }
  return Status::Ok();
}

}  // namespace railyard::storage::snapshot
