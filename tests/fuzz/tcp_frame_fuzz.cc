// Fuzz target `tcp_frame`: the fabric TCP transport's wire
// (proxy/fabric/tcp/tcp_frame.h): the first input byte chooses the reading side
// (target or initiator), the next 64 bytes are a frame header for
// DecodeFrameHeader, the rest a packed Worker address for WorkerAddress::Unpack
// (the address peers exchange out of band, and the hello's worker).
// Invariants: a refusal has a message and leaves the output untouched; an accepted
// header keeps every size within the documented limits for its type and
// direction (a Write chunk inside its op, a Read chunk at most kMaxFramePayload, a
// record's payload its size, a WriteFinal's reported bytes at least its op's, lazy
// acks on Writes only, a bound-only ack naming no op, ...),
// and DescribeFrame prints it; an accepted
// address re-packs to exactly its input bytes.
#include <algorithm>
#include <vector>

#include "proxy/fabric/tcp/tcp_frame.h"
#include "tests/fuzz/fuzz_target.h"

namespace t = railyard::fabric::tcp;

namespace {

bool Frame(const uint8_t (&bytes)[sizeof(t::FrameHeader)], t::Direction dir) {
  t::FrameHeader out;
  out.seq = 0x5151;
  out.value = 0x5252;
  const railyard::Status s = t::DecodeFrameHeader(bytes, dir, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.seq == 0x5151 && out.value == 0x5252 && out.magic == 0 && out.type == 0);
    return false;
  }
  FUZZ_CHECK(std::memcmp(&out, bytes, sizeof out) == 0);
  FUZZ_CHECK(out.magic == t::kFrameMagic && out.version == t::kWireVersion);
  FUZZ_CHECK(out.payloadBytes <= t::kMaxFramePayload);
  FUZZ_CHECK((out.flags & ~(t::kFlagImmediate | t::kFlagReportBytes | t::kFlagLazyAck | t::kFlagBoundOnly | t::kFlagRelayed)) == 0);
  const t::FrameType type = out.frameType();
  const bool toTarget = type == t::FrameType::kHello || type == t::FrameType::kWrite ||
                        type == t::FrameType::kReadReq || type == t::FrameType::kFetchAdd ||
                        type == t::FrameType::kRecord;
  FUZZ_CHECK(toTarget == (dir == t::Direction::kToTarget));
  switch (type) {
    case t::FrameType::kHello:
      FUZZ_CHECK(out.payloadBytes == 0 && out.addr != 0 && out.offset < out.opBytes &&
                 out.opBytes <= t::kMaxSocketsPerConnection);
      break;
    case t::FrameType::kWrite:
      FUZZ_CHECK(out.opBytes <= t::kMaxOpBytes && out.offset <= out.opBytes && out.payloadBytes <= out.opBytes - out.offset);
      break;
    case t::FrameType::kReadReq:
      FUZZ_CHECK(out.payloadBytes == 0 && out.opBytes <= t::kMaxOpBytes && out.value <= t::kMaxFramePayload &&
                 out.offset <= out.opBytes && out.value <= out.opBytes - out.offset);
      break;
    case t::FrameType::kFetchAdd:
      FUZZ_CHECK(out.payloadBytes == 0 && out.opBytes == 8 && out.offset == 0);
      break;
    case t::FrameType::kRecord:
      FUZZ_CHECK(out.opBytes >= 1 && out.opBytes <= t::kMaxRecordBytes && out.payloadBytes == out.opBytes);
      break;
    case t::FrameType::kAck:
      FUZZ_CHECK(out.payloadBytes == 0);
      break;
    case t::FrameType::kNack:
      FUZZ_CHECK(out.payloadBytes <= t::kMaxNackText);
      break;
    case t::FrameType::kReadData:
      break;
    default:
      FUZZ_CHECK(false && "an unknown frame type was accepted");
  }
  if (out.flags & t::kFlagImmediate) FUZZ_CHECK(type == t::FrameType::kWrite);
  // Wire version 2: lazy acks on Writes only; a bound-only ack names no op and no value.
  if (out.flags & t::kFlagLazyAck) FUZZ_CHECK(type == t::FrameType::kWrite);
  if (out.flags & t::kFlagBoundOnly) FUZZ_CHECK(type == t::FrameType::kAck && out.seq == 0 && out.value == 0);
  // Wire version 3: only a hello says it was spliced through relays.
  if (out.flags & t::kFlagRelayed) FUZZ_CHECK(type == t::FrameType::kHello);
  // WriteFinal (issue 10): the reported bytes cover the op and stay within the op limit.
  if (out.flags & t::kFlagReportBytes) {
    FUZZ_CHECK((out.flags & t::kFlagImmediate) && out.value >= out.opBytes && out.value <= t::kMaxOpBytes);
  }
  FUZZ_CHECK(!t::DescribeFrame(out).empty());
  return true;
}

bool Address(std::span<const uint8_t> bytes) {
  t::WorkerAddress out;
  out.workerId = 0x6161;
  out.rails = {t::RailAddress{1, 2, 3}};
  const railyard::Status s = t::WorkerAddress::Unpack(bytes, &out);
  if (!s.ok()) {
    FUZZ_CHECK_REFUSAL(s);
    FUZZ_CHECK(out.workerId == 0x6161 && out.rails == (std::vector<t::RailAddress>{t::RailAddress{1, 2, 3}}));
    return false;
  }
  FUZZ_CHECK(out.workerId != 0 && !out.rails.empty() && out.rails.size() <= t::WorkerAddress::kMaxRails);
  for (const t::RailAddress& r : out.rails) {
    FUZZ_CHECK(r.port != 0 && r.ipv4 != 0);
    FUZZ_CHECK(!t::RailAddressText(r).empty());
  }
  const std::vector<uint8_t> again = out.Pack();
  FUZZ_CHECK(again.size() == bytes.size() && std::equal(again.begin(), again.end(), bytes.begin()));
  return true;
}

}  // namespace

RAILYARD_FUZZ_TARGET(TcpFrame) {
  Input in(data, size);
  const t::Direction dir = (in.Take<uint8_t>() & 1) ? t::Direction::kToInitiator : t::Direction::kToTarget;
  uint8_t header[sizeof(t::FrameHeader)];
  in.Bytes(header, sizeof header);
  bool accepted = Frame(header, dir);
  size_t n = 0;
  const uint8_t* rest = in.Span(in.left(), &n);
  accepted |= Address({rest, n});
  return accepted;
}
