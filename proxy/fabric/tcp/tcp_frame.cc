#include "proxy/fabric/tcp/tcp_frame.h"

#include <arpa/inet.h>

#include <bit>
#include <cstdio>
#include <cstring>

static_assert(std::endian::native == std::endian::little, "the fabric wire format assumes little-endian hosts");

namespace railyard::fabric::tcp {
namespace {

constexpr uint32_t kAddressMagic = 0x41575952;  // "RYWA"
constexpr size_t kAddressHeader = 16;
constexpr size_t kAddressPerRail = 12;

std::string Hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

const char* TypeName(uint8_t t) {
  switch (static_cast<FrameType>(t)) {
    case FrameType::kHello: return "hello";
    case FrameType::kWrite: return "write";
    case FrameType::kReadReq: return "read-request";
    case FrameType::kFetchAdd: return "fetch-add";
    case FrameType::kRecord: return "record";
    case FrameType::kAck: return "ack";
    case FrameType::kReadData: return "read-data";
    case FrameType::kNack: return "nack";
  }
  return "unknown";
}

Status Bad(const FrameHeader& h, const std::string& why) {
  return InvalidArgument("malformed " + std::string(TypeName(h.type)) + " frame (" + DescribeFrame(h) + "): " + why);
}

}  // namespace

FrameHeader MakeHeader(FrameType type) {
  FrameHeader h;
  h.magic = kFrameMagic;
  h.version = kWireVersion;
  h.type = static_cast<uint8_t>(type);
  return h;
}

std::string DescribeFrame(const FrameHeader& h) {
  return std::string(TypeName(h.type)) + " seq " + std::to_string(h.seq) + " addr " + Hex(h.addr) + " op " +
         std::to_string(h.opBytes) + " chunk +" + std::to_string(h.offset) + "/" + std::to_string(h.payloadBytes) +
         " key " + Hex(h.key) + " value " + std::to_string(h.value);
}

Status DecodeFrameHeader(const uint8_t* bytes, Direction dir, FrameHeader* out) {
  FrameHeader h;
  std::memcpy(&h, bytes, sizeof h);
  if (h.magic != kFrameMagic) return InvalidArgument("not a Railyard fabric frame (magic " + Hex(h.magic) + ")");
  if (h.version != kWireVersion) {
    return InvalidUsage("fabric wire version " + std::to_string(h.version) + " from the peer, this build speaks " +
                        std::to_string(kWireVersion));
  }
  const FrameType t = h.frameType();
  const bool toTarget = t == FrameType::kHello || t == FrameType::kWrite || t == FrameType::kReadReq ||
                        t == FrameType::kFetchAdd || t == FrameType::kRecord;
  const bool toInitiator = t == FrameType::kAck || t == FrameType::kReadData || t == FrameType::kNack;
  if (!toTarget && !toInitiator) return Bad(h, "unknown frame type " + std::to_string(h.type));
  if ((dir == Direction::kToTarget) != toTarget) return Bad(h, "frame type sent in the wrong direction");
  if (h.flags & ~(kFlagImmediate | kFlagReportBytes | kFlagLazyAck | kFlagBoundOnly)) {
    return Bad(h, "unknown flags " + std::to_string(h.flags));
  }
  if ((h.flags & kFlagImmediate) && t != FrameType::kWrite) return Bad(h, "immediate flag on a non-write");
  if ((h.flags & kFlagLazyAck) && t != FrameType::kWrite) return Bad(h, "lazy-ack flag on a non-write");
  if ((h.flags & kFlagBoundOnly) && t != FrameType::kAck) return Bad(h, "bound-only flag on a non-ack");
  if ((h.flags & kFlagReportBytes) && !(h.flags & kFlagImmediate)) return Bad(h, "reported bytes without an immediate");
  if (h.payloadBytes > kMaxFramePayload) return Bad(h, "payload above " + std::to_string(kMaxFramePayload));
  switch (t) {
    case FrameType::kHello:
      if (h.payloadBytes != 0) return Bad(h, "hello with a payload");
      if (h.opBytes == 0 || h.opBytes > kMaxSocketsPerConnection || h.offset >= h.opBytes) {
        return Bad(h, "socket " + std::to_string(h.offset) + " of " + std::to_string(h.opBytes));
      }
      if (h.addr == 0) return Bad(h, "worker id 0");
      break;
    case FrameType::kWrite:
      if (h.opBytes > kMaxOpBytes) return Bad(h, "op above " + std::to_string(kMaxOpBytes) + " bytes");
      if (h.offset > h.opBytes || h.payloadBytes > h.opBytes - h.offset) return Bad(h, "chunk outside its op");
      if ((h.flags & kFlagReportBytes) && (h.value < h.opBytes || h.value > kMaxOpBytes)) {
        return Bad(h, "reported bytes " + std::to_string(h.value) + " outside [op bytes, " + std::to_string(kMaxOpBytes) + "]");
      }
      break;
    case FrameType::kReadReq:
      if (h.payloadBytes != 0) return Bad(h, "read request with a payload");
      if (h.opBytes > kMaxOpBytes) return Bad(h, "op above " + std::to_string(kMaxOpBytes) + " bytes");
      if (h.value > kMaxFramePayload) return Bad(h, "read chunk above " + std::to_string(kMaxFramePayload));
      if (h.offset > h.opBytes || h.value > h.opBytes - h.offset) return Bad(h, "chunk outside its op");
      break;
    case FrameType::kFetchAdd:
      if (h.payloadBytes != 0 || h.opBytes != 8 || h.offset != 0) return Bad(h, "fetch-add is 8 bytes, no payload");
      break;
    case FrameType::kRecord:
      if (h.opBytes == 0 || h.opBytes > kMaxRecordBytes) {
        return Bad(h, "record of " + std::to_string(h.opBytes) + " bytes (1.." + std::to_string(kMaxRecordBytes) + ")");
      }
      if (h.payloadBytes != h.opBytes || h.offset != 0) return Bad(h, "record payload differs from its size");
      break;
    case FrameType::kAck:
      if (h.payloadBytes != 0) return Bad(h, "ack with a payload");
      if ((h.flags & kFlagBoundOnly) && (h.seq != 0 || h.value != 0)) return Bad(h, "bound-only ack naming an op");
      break;
    case FrameType::kReadData:
      break;  // checked against the Read it names
    case FrameType::kNack:
      if (h.payloadBytes > kMaxNackText) return Bad(h, "nack text above " + std::to_string(kMaxNackText));
      break;
  }
  *out = h;
  return Status::Ok();
}

std::vector<uint8_t> WorkerAddress::Pack() const {
  std::vector<uint8_t> out(kAddressHeader + kAddressPerRail * rails.size());
  const uint32_t magic = kAddressMagic;
  const uint16_t version = kVersion;
  const uint16_t n = static_cast<uint16_t>(rails.size());
  std::memcpy(out.data(), &magic, 4);
  std::memcpy(out.data() + 4, &version, 2);
  std::memcpy(out.data() + 6, &n, 2);
  std::memcpy(out.data() + 8, &workerId, 8);
  for (size_t i = 0; i < rails.size(); ++i) {
    uint8_t* p = out.data() + kAddressHeader + kAddressPerRail * i;
    std::memcpy(p, &rails[i].ipv4, 4);
    std::memcpy(p + 4, &rails[i].port, 2);
    std::memcpy(p + 8, &rails[i].speedMbps, 4);
  }
  return out;
}

Status WorkerAddress::Unpack(std::span<const uint8_t> b, WorkerAddress* out) {
  if (b.size() < kAddressHeader) return InvalidArgument("worker address of " + std::to_string(b.size()) + " bytes");
  uint32_t magic;
  uint16_t version, n;
  std::memcpy(&magic, b.data(), 4);
  std::memcpy(&version, b.data() + 4, 2);
  std::memcpy(&n, b.data() + 6, 2);
  if (magic != kAddressMagic) return InvalidArgument("not a Railyard fabric worker address (magic " + Hex(magic) + ")");
  if (version != kVersion) {
    return InvalidArgument("worker address version " + std::to_string(version) + ", this build speaks " +
                           std::to_string(kVersion));
  }
  if (n == 0 || n > kMaxRails) return InvalidArgument("worker address with " + std::to_string(n) + " rails (1..16)");
  if (b.size() != kAddressHeader + kAddressPerRail * n) {
    return InvalidArgument("worker address of " + std::to_string(b.size()) + " bytes for " + std::to_string(n) +
                           " rails");
  }
  WorkerAddress a;
  std::memcpy(&a.workerId, b.data() + 8, 8);
  if (a.workerId == 0) return InvalidArgument("worker address with worker id 0");
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* p = b.data() + kAddressHeader + kAddressPerRail * i;
    RailAddress r;
    uint16_t reserved;
    std::memcpy(&r.ipv4, p, 4);
    std::memcpy(&r.port, p + 4, 2);
    std::memcpy(&reserved, p + 6, 2);
    std::memcpy(&r.speedMbps, p + 8, 4);
    if (r.ipv4 == 0 || r.ipv4 == 0xffffffffu) return InvalidArgument("worker address rail " + std::to_string(i) + " has no usable IPv4 address");
    if (r.port == 0) return InvalidArgument("worker address rail " + std::to_string(i) + " has port 0");
    if (reserved != 0) return InvalidArgument("worker address rail " + std::to_string(i) + " has reserved bits set");
    a.rails.push_back(r);
  }
  *out = std::move(a);
  return Status::Ok();
}

std::string RailAddressText(const RailAddress& a) {
  char ip[INET_ADDRSTRLEN] = {};
  in_addr in{};
  in.s_addr = a.ipv4;
  inet_ntop(AF_INET, &in, ip, sizeof ip);
  return std::string(ip) + ":" + std::to_string(a.port);
}

}  // namespace railyard::fabric::tcp
