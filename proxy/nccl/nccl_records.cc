#include "proxy/nccl/nccl_records.h"

#include <cstring>

namespace railyard::proxy::nccl {

namespace {

/// Fixed part of a hello record; fifo key and worker address follow.
struct HelloWire {
  RecordHeader header;
  uint64_t listenId;
  uint32_t sendCommId;
  uint32_t pid;
  char host[32];
  uint16_t fifoKeyBytes;
  uint16_t addressBytes;
  uint32_t pad;
};
static_assert(sizeof(HelloWire) == 64);

struct CloseWire {
  RecordHeader header;
  uint32_t commId;
  uint32_t pad;
};
static_assert(sizeof(CloseWire) == 16);

}  // namespace

Status EncodeFabricHandle(const FabricHandle& h, void* out) {
  if (h.address.empty() || h.address.size() > kHandleAddressBytes) {
    // What fits: a 16-byte header, then 8 bytes a rail in fabric mode (runtime's
    // HostAddress: 6 rails, one of them the host-local rail when the Worker started with
    // no cable) and 12 a rail for a TCP Worker (fabric/tcp's WorkerAddress: 4). (New-user
    // trial: "at most 3" where 6 worked.)
    return InvalidArgument("fabric worker address of " + std::to_string(h.address.size()) +
                           " bytes does not fit a listen handle (1.." + std::to_string(kHandleAddressBytes) +
                           "): an NCCL listen handle carries at most " + std::to_string((kHandleAddressBytes - 16) / 8) +
                           " cabled rails in fabric mode (5 when the process started before its host had a cable), " +
                           std::to_string((kHandleAddressBytes - 16) / 12) +
                           " rails over a TCP Worker; narrow RAILYARD_SOCKET_IFNAME (railyardd's --ifname; the same "
                           "for railyardd and every rank of the host), or set RAILYARD_COMMS=legacy");
  }
  FabricHandleWire w{};
  w.header = MakeHeader(RecordKind::kFabricListen);
  w.listenId = h.listenId;
  w.pid = h.pid;
  w.addressBytes = static_cast<uint16_t>(h.address.size());
  std::memcpy(w.host, h.host.data(), std::min(h.host.size(), sizeof w.host - 1));
  std::memcpy(w.address, h.address.data(), h.address.size());
  std::memcpy(out, &w, sizeof w);
  return Status::Ok();
}

bool IsFabricHandle(const void* in) {
  RecordHeader hdr;
  std::memcpy(&hdr, in, sizeof hdr);
  return hdr.magic == kMagic && hdr.kind == static_cast<uint16_t>(RecordKind::kFabricListen);
}

Status DecodeFabricHandle(const void* in, FabricHandle* out) {
  FabricHandleWire w;
  std::memcpy(&w, in, sizeof w);
  RY_RETURN_IF_ERROR(CheckHeader(w.header, "listen handle"));
  if (w.header.kind != static_cast<uint16_t>(RecordKind::kFabricListen)) {
    return InvalidUsage("listen handle has record kind " + std::to_string(w.header.kind) +
                        ", expected a fabric listen handle: the peer runs other comms (set RAILYARD_COMMS, "
                        "RAILYARD_TRANSPORT and RAILYARD_FABRIC the same on every host)");
  }
  if (w.addressBytes == 0 || w.addressBytes > kHandleAddressBytes) {
    return InvalidUsage("listen handle's worker address has " + std::to_string(w.addressBytes) + " bytes (1.." +
                        std::to_string(kHandleAddressBytes) + ")");
  }
  *out = FabricHandle{};
  out->listenId = w.listenId;
  out->pid = w.pid;
  out->host.assign(w.host, strnlen(w.host, sizeof w.host - 1));
  out->address.assign(w.address, w.address + w.addressBytes);
  return Status::Ok();
}

std::vector<uint8_t> EncodeHello(const Hello& h) {
  HelloWire w{};
  w.header = MakeHeader(RecordKind::kFabricHello);
  w.listenId = h.listenId;
  w.sendCommId = h.sendCommId;
  w.pid = h.pid;
  CopyHostName(h.host, w.host);
  w.fifoKeyBytes = static_cast<uint16_t>(h.fifoKey.size());
  w.addressBytes = static_cast<uint16_t>(h.address.size());
  std::vector<uint8_t> out(sizeof w + h.fifoKey.size() + h.address.size());
  std::memcpy(out.data(), &w, sizeof w);
  std::memcpy(out.data() + sizeof w, h.fifoKey.data(), h.fifoKey.size());
  std::memcpy(out.data() + sizeof w + h.fifoKey.size(), h.address.data(), h.address.size());
  return out;
}

Status DecodeHello(std::span<const uint8_t> bytes, Hello* out, fabric::RemoteKey* fifoKey) {
  HelloWire w;
  if (bytes.size() < sizeof w) {
    return RemoteError("fabric hello of " + std::to_string(bytes.size()) + " bytes (at least " +
                       std::to_string(sizeof w) + ")");
  }
  std::memcpy(&w, bytes.data(), sizeof w);
  RY_RETURN_IF_ERROR(CheckHeader(w.header, "fabric hello"));
  if (w.header.kind != static_cast<uint16_t>(RecordKind::kFabricHello)) {
    return RemoteError("fabric hello has record kind " + std::to_string(w.header.kind));
  }
  if (w.fifoKeyBytes > kMaxPackedBytes || w.addressBytes > kMaxPackedBytes || w.addressBytes == 0 ||
      bytes.size() != sizeof w + w.fifoKeyBytes + w.addressBytes) {
    return RemoteError("fabric hello of " + std::to_string(bytes.size()) + " bytes announces a " +
                       std::to_string(w.fifoKeyBytes) + "-byte FIFO key and a " + std::to_string(w.addressBytes) +
                       "-byte worker address");
  }
  if (w.sendCommId == 0) return RemoteError("fabric hello names send comm 0");
  const uint8_t* key = bytes.data() + sizeof w;
  fabric::RemoteKey k;
  if (Status s = fabric::RemoteKey::Unpack({key, w.fifoKeyBytes}, &k); !s.ok()) {
    return RemoteError("fabric hello's FIFO key: " + s.message());
  }
  if (k.length < sizeof(FabricCts) * 32) {
    return RemoteError("fabric hello's FIFO key covers " + std::to_string(k.length) + " bytes, less than " +
                       std::to_string(sizeof(FabricCts) * 32));
  }
  *out = Hello{};
  out->listenId = w.listenId;
  out->sendCommId = w.sendCommId;
  out->pid = w.pid;
  out->host.assign(w.host, strnlen(w.host, sizeof w.host - 1));
  out->fifoKey.assign(key, key + w.fifoKeyBytes);
  out->address.assign(key + w.fifoKeyBytes, key + w.fifoKeyBytes + w.addressBytes);
  *fifoKey = k;
  return Status::Ok();
}

Status DecodeCts(const FabricCts& rec, uint64_t bytes, CtsRecord* plain, fabric::RemoteKey (&keys)[kMaxRecvs]) {
  RY_RETURN_IF_ERROR(CheckHeader(rec.header, "clear-to-send record"));
  if (rec.header.kind != static_cast<uint16_t>(RecordKind::kFabricCts)) {
    return RemoteError("clear-to-send record has record kind " + std::to_string(rec.header.kind));
  }
  if (rec.n < 1 || rec.n > static_cast<uint32_t>(kMaxRecvs)) {
    return RemoteError("clear-to-send record for seq " + std::to_string(rec.seq) + " has " + std::to_string(rec.n) +
                       " buffers, expected 1.." + std::to_string(kMaxRecvs));
  }
  if (bytes != FabricCtsBytes(rec.n)) {
    return RemoteError("clear-to-send record of " + std::to_string(rec.n) + " buffers arrived in " +
                       std::to_string(bytes) + " bytes, expected " + std::to_string(FabricCtsBytes(rec.n)));
  }
  // Decoded into locals and copied out only when every buffer checks out: a refused
  // record leaves `plain` and `keys` as they were (the fuzz target nccl_records
  // found the first buffers' keys written before a later one was refused).
  CtsRecord decoded{};
  decoded.header = rec.header;
  decoded.seq = rec.seq;
  decoded.n = rec.n;
  fabric::RemoteKey k[kMaxRecvs];
  for (uint32_t i = 0; i < rec.n; ++i) {
    const FabricCtsEntry& e = rec.entries[i];
    if (e.keyBytes > sizeof e.key) {
      return RemoteError("clear-to-send seq " + std::to_string(rec.seq) + " buffer " + std::to_string(i) +
                         " has a " + std::to_string(e.keyBytes) + "-byte key");
    }
    if (Status s = fabric::RemoteKey::Unpack({e.key, e.keyBytes}, &k[i]); !s.ok()) {
      return RemoteError("clear-to-send seq " + std::to_string(rec.seq) + " buffer " + std::to_string(i) + ": " +
                         s.message());
    }
    if (e.addr < k[i].base || e.size > k[i].length || e.addr - k[i].base > k[i].length - e.size) {
      return RemoteError("clear-to-send seq " + std::to_string(rec.seq) + " buffer " + std::to_string(i) +
                         " of " + std::to_string(e.size) + " bytes is not inside its region");
    }
    decoded.entries[i] = CtsEntry{e.addr, e.size, 0, e.tag};
  }
  *plain = decoded;
  for (uint32_t i = 0; i < rec.n; ++i) keys[i] = std::move(k[i]);
  return Status::Ok();
}

std::vector<uint8_t> EncodeClose(const CloseNotice& c) {
  CloseWire w{};
  w.header = MakeHeader(RecordKind::kFabricClose);
  w.commId = c.commId;
  std::vector<uint8_t> out(sizeof w);
  std::memcpy(out.data(), &w, sizeof w);
  return out;
}

Status DecodeClose(std::span<const uint8_t> bytes, CloseNotice* out) {
  CloseWire w;
  if (bytes.size() != sizeof w) return RemoteError("close notice of " + std::to_string(bytes.size()) + " bytes");
  std::memcpy(&w, bytes.data(), sizeof w);
  RY_RETURN_IF_ERROR(CheckHeader(w.header, "close notice"));
  if (w.header.kind != static_cast<uint16_t>(RecordKind::kFabricClose)) {
    return RemoteError("close notice has record kind " + std::to_string(w.header.kind));
  }
  out->commId = w.commId;
  return Status::Ok();
}

uint16_t RecordKindOf(std::span<const uint8_t> bytes) {
  RecordHeader h;
  if (bytes.size() < sizeof h) return 0;
  std::memcpy(&h, bytes.data(), sizeof h);
  return h.magic == kMagic ? h.kind : 0;
}

}  // namespace railyard::proxy::nccl
