#include "proxy/fabric/tcp/tcp_frame.h"

#include <arpa/inet.h>

#include <bit>
#include <cstdio>
#include <cstring>

#include "proxy/fabric/address_record.h"

static_assert(std::endian::native == std::endian::little, "the fabric wire format assumes little-endian hosts");

namespace railyard::fabric::tcp {
namespace {

constexpr uint32_t kAddressMagic = 0x41575952;  // "RYWA"
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
  if (h.flags & ~(kFlagImmediate | kFlagReportBytes | kFlagLazyAck | kFlagBoundOnly | kFlagRelayed)) {
    return Bad(h, "unknown flags " + std::to_string(h.flags));
  }
  if ((h.flags & kFlagImmediate) && t != FrameType::kWrite) return Bad(h, "immediate flag on a non-write");
  if ((h.flags & kFlagLazyAck) && t != FrameType::kWrite) return Bad(h, "lazy-ack flag on a non-write");
  if ((h.flags & kFlagBoundOnly) && t != FrameType::kAck) return Bad(h, "bound-only flag on a non-ack");
  if ((h.flags & kFlagRelayed) && t != FrameType::kHello) return Bad(h, "relayed flag on a non-hello");
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

namespace {
const AddressRecordFormat kWorkerAddressFormat{
    kAddressMagic, WorkerAddress::kVersion, kAddressPerRail, WorkerAddress::kMaxRails, "worker address",
    [](uint32_t magic) { return "not a Railyard fabric worker address (magic " + Hex(magic) + ")"; }};
}  // namespace

std::vector<uint8_t> WorkerAddress::Pack() const {
  return PackAddressRecord(kWorkerAddressFormat, workerId, rails,
                           [&](size_t i, uint8_t* p) { std::memcpy(p, &rails[i].speedMbps, 4); });
}

Status WorkerAddress::Unpack(std::span<const uint8_t> b, WorkerAddress* out) {
  WorkerAddress a;
  RY_RETURN_IF_ERROR(UnpackAddressRecord(kWorkerAddressFormat, b, &a.workerId,
                                         [&](size_t, uint32_t ipv4, uint16_t port, const uint8_t* p) {
                                           RailAddress r;
                                           r.ipv4 = ipv4;
                                           r.port = port;
                                           std::memcpy(&r.speedMbps, p, 4);
                                           a.rails.push_back(r);
                                           return Status::Ok();
                                         }));
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
