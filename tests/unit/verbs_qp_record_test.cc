// proxy/verbs/qp_record: the QP record set the two ends of a verbs connection
// exchange before any QP leaves INIT. Round trip of every field, the announced
// length, and each refusal (code and a message that names the problem).
#include "proxy/verbs/qp_record.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "env/status.h"
#include "proxy/wire.h"

namespace railyard::proxy::verbs {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

QpRailWire MakeRail(const char* device, uint8_t port, uint8_t gidSeed, uint32_t fifoRkey,
                    uint32_t ringRkey, uint16_t lid, uint8_t mtu, uint8_t linkLayer) {
  QpRailWire r{};
  for (int i = 0; i < 16; ++i) r.gid[i] = static_cast<uint8_t>(gidSeed + i);
  r.fifoRkey = fifoRkey;
  r.ringRkey = ringRkey;
  r.lid = lid;
  r.mtu = mtu;
  r.linkLayer = linkLayer;
  r.port = port;
  std::strncpy(r.device, device, sizeof r.device);
  return r;
}

QpWire MakeQp(uint32_t qpn, uint32_t psn, uint8_t rail) {
  QpWire q{};
  q.qpn = qpn;
  q.psn = psn;
  q.rail = rail;
  return q;
}

// 2 rails, 4 QPs, every header field non-zero and distinct.
QpSet SampleSet() {
  QpSet s;
  s.trafficClass = 106;
  s.serviceLevel = 3;
  s.ringEntries = 64;
  s.fifoAddr = 0x7f00'1234'5000ull;
  s.ringAddr = 0x7f00'abcd'e000ull;
  s.rails.push_back(MakeRail("rxe0", 1, 0x10, 0x1111, 0x2222, 0, 3, 2));
  s.rails.push_back(MakeRail("mlx5_1", 2, 0xa0, 0x3333, 0x4444, 17, 5, 1));
  s.qps.push_back(MakeQp(0x11, 0x00abcdef, 0));
  s.qps.push_back(MakeQp(0x12, 0x00123456, 1));
  s.qps.push_back(MakeQp(0x13, 0x00000001, 0));
  s.qps.push_back(MakeQp(0xffffff, 0x00ffffff, 1));
  return s;
}

QpSetHeader HeaderOf(const std::vector<char>& buf) {
  QpSetHeader h;
  std::memcpy(&h, buf.data(), sizeof h);
  return h;
}

void PutHeader(std::vector<char>* buf, const QpSetHeader& h) {
  std::memcpy(buf->data(), &h, sizeof h);
}

QpRailWire* RailAt(std::vector<char>* buf, size_t i) {
  return reinterpret_cast<QpRailWire*>(buf->data() + sizeof(QpSetHeader) + i * sizeof(QpRailWire));
}

QpWire* QpAt(std::vector<char>* buf, size_t nrails, size_t i) {
  return reinterpret_cast<QpWire*>(buf->data() + sizeof(QpSetHeader) + nrails * sizeof(QpRailWire) +
                                   i * sizeof(QpWire));
}

Status Decode(const std::vector<char>& buf, int expectedQps = 0) {
  QpSet out;
  return DecodeQpSet(buf.data(), buf.size(), expectedQps, &out);
}

// --- round trip --------------------------------------------------------------------------

TEST(QpRecord, BytesMatchLayout) {
  const QpSet s = SampleSet();
  EXPECT_EQ(QpSetBytes(s), 40u + 2 * 56u + 4 * 16u);
  EXPECT_EQ(EncodeQpSet(s).size(), 216u);
}

TEST(QpRecord, EncodeFillsHeader) {
  const std::vector<char> buf = EncodeQpSet(SampleSet());
  const QpSetHeader h = HeaderOf(buf);
  EXPECT_EQ(h.header.magic, kMagic);
  EXPECT_EQ(h.header.version, kProtocolVersion);
  EXPECT_EQ(h.header.kind, kKindQpSet);
  EXPECT_EQ(h.qpVersion, kQpRecordVersion);
  EXPECT_EQ(h.nrails, 2);
  EXPECT_EQ(h.nqps, 4);
  EXPECT_EQ(h.trafficClass, 106);
  EXPECT_EQ(h.serviceLevel, 3);
  EXPECT_EQ(h.bytes, 216u);
  EXPECT_EQ(h.ringEntries, 64u);
  EXPECT_EQ(h.fifoAddr, 0x7f00'1234'5000ull);
  EXPECT_EQ(h.ringAddr, 0x7f00'abcd'e000ull);
}

TEST(QpRecord, RoundTripKeepsEveryField) {
  const QpSet in = SampleSet();
  const std::vector<char> buf = EncodeQpSet(in);
  QpSet out;
  const Status st = DecodeQpSet(buf.data(), buf.size(), 4, &out);
  ASSERT_TRUE(st.ok()) << st.message();

  EXPECT_EQ(out.trafficClass, 106);
  EXPECT_EQ(out.serviceLevel, 3);
  EXPECT_EQ(out.ringEntries, 64u);
  EXPECT_EQ(out.fifoAddr, 0x7f00'1234'5000ull);
  EXPECT_EQ(out.ringAddr, 0x7f00'abcd'e000ull);

  ASSERT_EQ(out.rails.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    SCOPED_TRACE(i);
    const QpRailWire& a = in.rails[i];
    const QpRailWire& b = out.rails[i];
    EXPECT_EQ(std::memcmp(a.gid, b.gid, 16), 0);
    EXPECT_EQ(b.fifoRkey, a.fifoRkey);
    EXPECT_EQ(b.ringRkey, a.ringRkey);
    EXPECT_EQ(b.lid, a.lid);
    EXPECT_EQ(b.mtu, a.mtu);
    EXPECT_EQ(b.linkLayer, a.linkLayer);
    EXPECT_EQ(b.port, a.port);
    EXPECT_STREQ(b.device, a.device);
  }
  // Spot-check concrete values, not only equality with the input.
  EXPECT_EQ(out.rails[0].gid[0], 0x10);
  EXPECT_EQ(out.rails[0].gid[15], 0x1f);
  EXPECT_EQ(out.rails[1].gid[0], 0xa0);
  EXPECT_EQ(out.rails[1].fifoRkey, 0x3333u);
  EXPECT_EQ(out.rails[1].ringRkey, 0x4444u);
  EXPECT_EQ(out.rails[1].lid, 17);
  EXPECT_EQ(out.rails[1].mtu, 5);
  EXPECT_EQ(out.rails[1].linkLayer, 1);
  EXPECT_EQ(out.rails[1].port, 2);
  EXPECT_STREQ(out.rails[1].device, "mlx5_1");

  ASSERT_EQ(out.qps.size(), 4u);
  const uint32_t qpns[] = {0x11, 0x12, 0x13, 0xffffff};
  const uint32_t psns[] = {0x00abcdef, 0x00123456, 0x00000001, 0x00ffffff};
  const uint8_t rails[] = {0, 1, 0, 1};
  for (size_t i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(out.qps[i].qpn, qpns[i]);
    EXPECT_EQ(out.qps[i].psn, psns[i]);
    EXPECT_EQ(out.qps[i].rail, rails[i]);
  }
}

TEST(QpRecord, ExpectedQpsZeroAcceptsAnyCount) {
  const std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSet out;
  ASSERT_TRUE(DecodeQpSet(buf.data(), buf.size(), 0, &out).ok());
  EXPECT_EQ(out.qps.size(), 4u);
}

TEST(QpRecord, ExtraTrailingBytesAreNotRead) {
  // The caller hands in what it received; bytes beyond the announced length are ignored.
  std::vector<char> buf = EncodeQpSet(SampleSet());
  buf.resize(buf.size() + 8, 'x');
  QpSet out;
  ASSERT_TRUE(DecodeQpSet(buf.data(), buf.size(), 4, &out).ok());
  EXPECT_EQ(out.qps.size(), 4u);
}

TEST(QpRecord, MaximumSetRoundTrips) {
  QpSet s;
  for (int i = 0; i < kMaxConnRails; ++i) {
    s.rails.push_back(MakeRail("dev", static_cast<uint8_t>(i + 1), 0, 0, 0, 0, 1, 2));
  }
  for (int i = 0; i < kMaxConnQps; ++i) {
    s.qps.push_back(MakeQp(static_cast<uint32_t>(i + 1), 0, static_cast<uint8_t>(i % kMaxConnRails)));
  }
  const std::vector<char> buf = EncodeQpSet(s);
  uint32_t bytes = 0;
  ASSERT_TRUE(QpSetLength(buf.data(), buf.size(), &bytes).ok());
  EXPECT_EQ(bytes, 40u + 8 * 56u + 128 * 16u);
  QpSet out;
  ASSERT_TRUE(DecodeQpSet(buf.data(), buf.size(), kMaxConnQps, &out).ok());
  EXPECT_EQ(out.rails.size(), 8u);
  EXPECT_EQ(out.qps.size(), 128u);
  EXPECT_EQ(out.qps[127].qpn, 128u);
  EXPECT_EQ(out.qps[127].rail, 7);
}

// --- QpSetLength -------------------------------------------------------------------------

TEST(QpRecord, LengthOfGoodHeader) {
  const std::vector<char> buf = EncodeQpSet(SampleSet());
  uint32_t bytes = 0;
  // Only the header is needed.
  const Status st = QpSetLength(buf.data(), sizeof(QpSetHeader), &bytes);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(bytes, 216u);
}

TEST(QpRecord, LengthOfShortHeader) {
  const std::vector<char> buf = EncodeQpSet(SampleSet());
  uint32_t bytes = 1234;
  const Status st = QpSetLength(buf.data(), sizeof(QpSetHeader) - 1, &bytes);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("truncated"), HasSubstr("39 bytes"), HasSubstr("40")));
  EXPECT_EQ(bytes, 1234u);  // untouched on error
}

TEST(QpRecord, LengthOutOfRange) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSetHeader h = HeaderOf(buf);
  uint32_t bytes = 0;

  h.bytes = 39;  // less than the header
  PutHeader(&buf, h);
  Status st = QpSetLength(buf.data(), buf.size(), &bytes);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("announces 39 bytes"), HasSubstr("40..2536")));

  h.bytes = 2537;  // one more than 40 + 8*56 + 128*16
  PutHeader(&buf, h);
  st = QpSetLength(buf.data(), buf.size(), &bytes);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("announces 2537 bytes"));
}

// --- header refusals ---------------------------------------------------------------------

TEST(QpRecord, WrongMagicIsAnotherPlugin) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSetHeader h = HeaderOf(buf);
  h.header.magic = 0x4c43434e;  // "NCCL"
  PutHeader(&buf, h);
  uint32_t bytes = 0;
  Status st = QpSetLength(buf.data(), buf.size(), &bytes);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("QP record"), HasSubstr("another plugin"),
                                  HasSubstr("0x4c43434e")));
  st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("another plugin"));
}

TEST(QpRecord, WrongProtocolVersion) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSetHeader h = HeaderOf(buf);
  h.header.version = kProtocolVersion + 1;
  PutHeader(&buf, h);
  const Status st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(),
              AllOf(HasSubstr("QP record"),
                    HasSubstr("protocol version " + std::to_string(kProtocolVersion + 1)),
                    HasSubstr("speaks version " + std::to_string(kProtocolVersion))));
}

TEST(QpRecord, WrongKind) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSetHeader h = HeaderOf(buf);
  h.header.kind = kKindQpReady;
  PutHeader(&buf, h);
  const Status st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("kind 17"), HasSubstr("expected 16")));
}

TEST(QpRecord, WrongQpRecordVersion) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSetHeader h = HeaderOf(buf);
  h.qpVersion = 2;
  PutHeader(&buf, h);
  uint32_t bytes = 0;
  Status st = QpSetLength(buf.data(), buf.size(), &bytes);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("QP record version 2"), HasSubstr("speaks version 1")));
  st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("QP record version 2"), HasSubstr("speaks version 1")));
}

// --- body refusals -----------------------------------------------------------------------

TEST(QpRecord, FewerBytesThanHeader) {
  const std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSet out;
  const Status st = DecodeQpSet(buf.data(), 10, 0, &out);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("truncated"), HasSubstr("10 bytes")));
}

TEST(QpRecord, FewerBytesThanAnnounced) {
  const std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSet out;
  const Status st = DecodeQpSet(buf.data(), buf.size() - 1, 4, &out);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("truncated"), HasSubstr("215 of the 216 bytes")));
}

TEST(QpRecord, BytesFieldNotMatchingCounts) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSetHeader h = HeaderOf(buf);
  h.nqps = 3;  // 40 + 2*56 + 3*16 = 200, but bytes says 216
  PutHeader(&buf, h);
  const Status st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("216 bytes"), HasSubstr("2 rails and 3 QPs"),
                                  HasSubstr("(200 bytes)")));
}

TEST(QpRecord, BytesFieldSmallerThanCounts) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpSetHeader h = HeaderOf(buf);
  h.bytes = 200;  // counts still say 2 rails, 4 QPs = 216
  PutHeader(&buf, h);
  const Status st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("200 bytes"), HasSubstr("2 rails and 4 QPs"),
                                  HasSubstr("(216 bytes)")));
}

TEST(QpRecord, RailCountOutOfRange) {
  for (uint16_t n : {uint16_t{0}, uint16_t{9}}) {
    SCOPED_TRACE(n);
    std::vector<char> buf = EncodeQpSet(SampleSet());
    QpSetHeader h = HeaderOf(buf);
    h.nrails = n;
    PutHeader(&buf, h);
    const Status st = Decode(buf);
    EXPECT_EQ(st.code(), Code::kInvalidUsage);
    EXPECT_THAT(st.message(),
                AllOf(HasSubstr("lists " + std::to_string(n) + " rails"), HasSubstr("expected 1..8")));
  }
}

TEST(QpRecord, QpCountOutOfRange) {
  for (uint16_t n : {uint16_t{0}, uint16_t{129}}) {
    SCOPED_TRACE(n);
    std::vector<char> buf = EncodeQpSet(SampleSet());
    QpSetHeader h = HeaderOf(buf);
    h.nqps = n;
    PutHeader(&buf, h);
    const Status st = Decode(buf);
    EXPECT_EQ(st.code(), Code::kInvalidUsage);
    EXPECT_THAT(st.message(),
                AllOf(HasSubstr("lists " + std::to_string(n) + " QPs"), HasSubstr("expected 1..128")));
  }
}

TEST(QpRecord, ExpectedQpsMismatch) {
  QpSet s = SampleSet();
  s.qps.pop_back();  // 3 QPs on the wire
  const std::vector<char> buf = EncodeQpSet(s);
  const Status st = Decode(buf, 4);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("covers 3 QPs"), HasSubstr("has 4")));
  EXPECT_TRUE(Decode(buf, 3).ok());
}

TEST(QpRecord, QpNamesRailOutOfRange) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpAt(&buf, 2, 2)->rail = 2;  // rails are 0 and 1
  const Status st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("QP 2"), HasSubstr("names rail 2 of 2")));
}

TEST(QpRecord, MtuEnumOutOfRange) {
  for (uint8_t mtu : {uint8_t{0}, uint8_t{6}}) {
    SCOPED_TRACE(int{mtu});
    std::vector<char> buf = EncodeQpSet(SampleSet());
    RailAt(&buf, 1)->mtu = mtu;
    const Status st = Decode(buf);
    EXPECT_EQ(st.code(), Code::kInvalidUsage);
    EXPECT_THAT(st.message(), AllOf(HasSubstr("mlx5_1:2"), HasSubstr("MTU enum " + std::to_string(mtu)),
                                    HasSubstr("expected 1..5")));
  }
}

TEST(QpRecord, MtuEnumBoundsAccepted) {
  for (uint8_t mtu : {uint8_t{1}, uint8_t{5}}) {
    SCOPED_TRACE(int{mtu});
    std::vector<char> buf = EncodeQpSet(SampleSet());
    RailAt(&buf, 0)->mtu = mtu;
    EXPECT_TRUE(Decode(buf).ok());
  }
}

TEST(QpRecord, ZeroQpNumber) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpAt(&buf, 2, 3)->qpn = 0;
  const Status st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), AllOf(HasSubstr("QP 3"), HasSubstr("QP number 0")));
}

TEST(QpRecord, FailedDecodeLeavesOutputUntouched) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  QpAt(&buf, 2, 0)->qpn = 0;
  QpSet out;
  out.ringEntries = 7;
  out.qps.push_back(MakeQp(99, 0, 0));
  ASSERT_FALSE(DecodeQpSet(buf.data(), buf.size(), 0, &out).ok());
  EXPECT_EQ(out.ringEntries, 7u);
  ASSERT_EQ(out.qps.size(), 1u);
  EXPECT_EQ(out.qps[0].qpn, 99u);
}

// --- RailName ----------------------------------------------------------------------------

TEST(QpRecord, RailNameFormat) {
  EXPECT_EQ(RailName(MakeRail("rxe0", 1, 0, 0, 0, 0, 3, 2)), "rxe0:1");
  EXPECT_EQ(RailName(MakeRail("mlx5_11", 2, 0, 0, 0, 0, 3, 2)), "mlx5_11:2");
  EXPECT_EQ(RailName(MakeRail("", 0, 0, 0, 0, 0, 3, 2)), ":0");
}

TEST(QpRecord, RailNameWithoutNulStopsAt24Bytes) {
  QpRailWire r{};
  std::memset(r.device, 'a', sizeof r.device);  // no NUL anywhere
  r.port = 1;
  EXPECT_EQ(RailName(r), std::string(24, 'a') + ":1");
}

TEST(QpRecord, DecodeTerminatesUnterminatedDeviceName) {
  std::vector<char> buf = EncodeQpSet(SampleSet());
  std::memset(RailAt(&buf, 0)->device, 'b', sizeof(QpRailWire::device));  // no NUL
  QpSet out;
  ASSERT_TRUE(DecodeQpSet(buf.data(), buf.size(), 4, &out).ok());
  EXPECT_EQ(out.rails[0].device[23], '\0');
  EXPECT_EQ(std::string(out.rails[0].device), std::string(23, 'b'));
  EXPECT_EQ(RailName(out.rails[0]), std::string(23, 'b') + ":1");
  // The error path also names an unterminated device safely.
  RailAt(&buf, 0)->mtu = 9;
  const Status st = Decode(buf);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr(std::string(23, 'b') + ":1 MTU enum 9"));
}

}  // namespace
}  // namespace railyard::proxy::verbs
