// proxy/verbs/link_params: IB MTU enum <-> bytes, RoCE active MTU from the netdev MTU,
// symmetric MTU negotiation with a logged mismatch, TC/SL precedence, timeout and
// retry count from the configuration.
#include "proxy/verbs/link_params.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "env/config.h"
#include "env/log.h"
#include "tests/unit/log_capture.h"
#include "tests/unit/parse_env.h"

namespace railyard::proxy::verbs {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

using railyard::test_support::LogCapture;

using railyard::test_support::ParseEnv;

// --- MTU ------------------------------------------------------------------------------

TEST(VerbsMtu, EnumAndBytes) {
  // enum ibv_mtu: IBV_MTU_256 = 1 ... IBV_MTU_4096 = 5.
  EXPECT_EQ(static_cast<int>(IbMtu::k256), 1);
  EXPECT_EQ(static_cast<int>(IbMtu::k4096), 5);
  const std::pair<IbMtu, int> table[] = {{IbMtu::k256, 256},
                                         {IbMtu::k512, 512},
                                         {IbMtu::k1024, 1024},
                                         {IbMtu::k2048, 2048},
                                         {IbMtu::k4096, 4096}};
  for (const auto& [mtu, bytes] : table) {
    EXPECT_EQ(IbMtuBytes(mtu), bytes);
    ASSERT_TRUE(IbMtuFromBytes(bytes).has_value());
    EXPECT_EQ(*IbMtuFromBytes(bytes), mtu);
    ASSERT_TRUE(IbMtuFromEnum(static_cast<int>(mtu)).has_value());
    EXPECT_EQ(*IbMtuFromEnum(static_cast<int>(mtu)), mtu);
  }
  for (int bad : {0, 128, 1000, 1500, 8192, -1}) EXPECT_FALSE(IbMtuFromBytes(bad).has_value()) << bad;
  for (int bad : {0, 6, -1, 4096}) EXPECT_FALSE(IbMtuFromEnum(bad).has_value()) << bad;
}

TEST(VerbsMtu, RoceActiveMtuFromNetdevMtu) {
  EXPECT_EQ(RoceActiveMtu(1500), IbMtu::k1024);  // rxe / default Ethernet
  EXPECT_EQ(RoceActiveMtu(9000), IbMtu::k4096);  // jumbo frames (Spark fixture)
  EXPECT_EQ(RoceActiveMtu(4200), IbMtu::k4096);  // 4200 - 96 = 4104
  EXPECT_EQ(RoceActiveMtu(4191), IbMtu::k2048);  // 4095 bytes of payload
  EXPECT_EQ(RoceActiveMtu(4192), IbMtu::k4096);
  EXPECT_EQ(RoceActiveMtu(4000), IbMtu::k2048);
  EXPECT_EQ(RoceActiveMtu(352), IbMtu::k256);
  EXPECT_FALSE(RoceActiveMtu(351).has_value());
  EXPECT_FALSE(RoceActiveMtu(0).has_value());
}

TEST(VerbsMtu, NegotiateTakesTheMinimumOnBothSides) {
  LogCapture logs;
  MtuNegotiation same = NegotiateMtu(IbMtu::k4096, IbMtu::k4096);
  EXPECT_EQ(same.mtu, IbMtu::k4096);
  EXPECT_FALSE(same.mismatch);
  EXPECT_TRUE(same.message.empty());
  EXPECT_THAT(logs.lines(), IsEmpty());

  MtuNegotiation local = NegotiateMtu(IbMtu::k4096, IbMtu::k1024);
  MtuNegotiation remote = NegotiateMtu(IbMtu::k1024, IbMtu::k4096);
  EXPECT_EQ(local.mtu, IbMtu::k1024);
  EXPECT_EQ(remote.mtu, IbMtu::k1024);  // symmetric: both ends agree
  EXPECT_TRUE(local.mismatch);
  EXPECT_TRUE(remote.mismatch);
  EXPECT_EQ(local.message,
            "active MTU mismatch: local 4096 bytes, remote 1024 bytes; using 1024 bytes on both sides");
  EXPECT_THAT(logs.lines(),
              ElementsAre(AllOf(HasSubstr("INFO"), HasSubstr("local 4096 bytes, remote 1024 bytes")),
                          AllOf(HasSubstr("INFO"), HasSubstr("local 1024 bytes, remote 4096 bytes"))));

  // A 9000-byte Spark port against a 1500-byte rxe peer.
  MtuNegotiation mixed = NegotiateMtu(*RoceActiveMtu(9000), *IbMtuFromEnum(3));
  EXPECT_EQ(IbMtuBytes(mixed.mtu), 1024);
}

// --- TC / SL / timeout / retry --------------------------------------------------------

TEST(VerbsQpAttrs, DefaultsWithoutConfigOrTrafficClass) {
  Status st;
  env::Config c = ParseEnv({}, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  LinkConfig lc = LinkConfigFrom(c);
  EXPECT_EQ(lc.trafficClass, -1);
  EXPECT_EQ(lc.serviceLevel, -1);
  EXPECT_EQ(lc.timeout, 20);
  EXPECT_EQ(lc.retryCnt, 7);
  EXPECT_EQ(lc.qpsPerConn, 1);

  QpLinkAttrs a = ResolveQpLinkAttrs(lc, -1);  // NCCL_NET_TRAFFIC_CLASS_UNDEF
  EXPECT_EQ(a.trafficClass, 0);
  EXPECT_EQ(a.serviceLevel, 0);
  EXPECT_EQ(a.trafficClassSource, "default");
  EXPECT_EQ(a.serviceLevelSource, "default");
  EXPECT_EQ(a.timeout, 20);
  EXPECT_EQ(a.retryCnt, 7);
  EXPECT_EQ(a.rnrRetry, 7);
  EXPECT_EQ(a.minRnrTimer, 12);
  EXPECT_EQ(a.hopLimit, 255);
  EXPECT_TRUE(a.note.empty());
}

TEST(VerbsQpAttrs, InitTrafficClassFeedsBothWhenUnset) {
  LinkConfig lc;
  QpLinkAttrs a = ResolveQpLinkAttrs(lc, 3);
  EXPECT_EQ(a.trafficClass, 3);
  EXPECT_EQ(a.serviceLevel, 3);
  EXPECT_EQ(a.trafficClassSource, "trafficClass (ncclConfig_t)");
  EXPECT_EQ(a.serviceLevelSource, "trafficClass (ncclConfig_t)");

  QpLinkAttrs zero = ResolveQpLinkAttrs(lc, 0);  // 0 is defined, not "unset"
  EXPECT_EQ(zero.trafficClassSource, "trafficClass (ncclConfig_t)");
  EXPECT_EQ(zero.trafficClass, 0);
}

TEST(VerbsQpAttrs, EnvironmentWinsOverInitTrafficClass) {
  Status st;
  env::Config c = ParseEnv({{"RAILYARD_TC", "106"}, {"RAILYARD_SL", "5"}}, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  QpLinkAttrs a = ResolveQpLinkAttrs(LinkConfigFrom(c), 3);
  EXPECT_EQ(a.trafficClass, 106);
  EXPECT_EQ(a.serviceLevel, 5);
  EXPECT_EQ(a.trafficClassSource, "RAILYARD_TC");
  EXPECT_EQ(a.serviceLevelSource, "RAILYARD_SL");

  // Only TC set: SL still follows the init trafficClass.
  c = ParseEnv({{"NCCL_IB_TC", "96"}}, &st);
  ASSERT_TRUE(st.ok());
  QpLinkAttrs b = ResolveQpLinkAttrs(LinkConfigFrom(c), 4);
  EXPECT_EQ(b.trafficClass, 96);
  EXPECT_EQ(b.trafficClassSource, "RAILYARD_TC");
  EXPECT_EQ(b.serviceLevel, 4);
  EXPECT_EQ(b.serviceLevelSource, "trafficClass (ncclConfig_t)");

  // RAILYARD_ beats the NCCL alias.
  c = ParseEnv({{"NCCL_IB_SL", "1"}, {"RAILYARD_SL", "2"}}, &st);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(ResolveQpLinkAttrs(LinkConfigFrom(c), -1).serviceLevel, 2);
}

TEST(VerbsQpAttrs, InitTrafficClassTooLargeForServiceLevel) {
  LinkConfig lc;
  QpLinkAttrs a = ResolveQpLinkAttrs(lc, 106);  // a DSCP-style value
  EXPECT_EQ(a.trafficClass, 106);
  EXPECT_EQ(a.serviceLevel, 0);
  EXPECT_EQ(a.serviceLevelSource, "default");
  EXPECT_THAT(a.note, AllOf(HasSubstr("trafficClass 106"), HasSubstr("service level (0..15)")));
  QpLinkAttrs b = ResolveQpLinkAttrs(lc, 300);
  EXPECT_EQ(b.trafficClass, 0);
  EXPECT_THAT(b.note, HasSubstr("traffic class (0..255)"));
}

TEST(VerbsQpAttrs, TimeoutAndRetryFromConfig) {
  Status st;
  env::Config c = ParseEnv({{"NCCL_IB_TIMEOUT", "22"}, {"RAILYARD_IB_RETRY_CNT", "3"},
                            {"NCCL_IB_QPS_PER_CONNECTION", "4"}},
                           &st);
  ASSERT_TRUE(st.ok()) << st.message();
  QpLinkAttrs a = ResolveQpLinkAttrs(LinkConfigFrom(c), -1);
  EXPECT_EQ(a.timeout, 22);
  EXPECT_EQ(a.retryCnt, 3);
  EXPECT_EQ(LinkConfigFrom(c).qpsPerConn, 4);

  for (auto bad : std::vector<std::pair<std::string, std::string>>{{"RAILYARD_IB_TIMEOUT", "32"},
                                                                  {"RAILYARD_IB_RETRY_CNT", "8"},
                                                                  {"NCCL_IB_TC", "256"},
                                                                  {"RAILYARD_SL", "16"},
                                                                  {"RAILYARD_TC", "-2"},
                                                                  {"RAILYARD_QPS_PER_CONN", "0"},
                                                                  {"RAILYARD_QPS_PER_CONN", "129"}}) {
    ParseEnv({bad}, &st);
    EXPECT_FALSE(st.ok()) << bad.first << "=" << bad.second;
    EXPECT_THAT(st.message(), HasSubstr(bad.first));
  }
}

TEST(VerbsQpAttrs, TimeoutSeconds) {
  EXPECT_NEAR(QpTimeoutSeconds(20), 4.294967296, 1e-9);  // 4.096 us x 2^20
  EXPECT_NEAR(QpTimeoutSeconds(14), 0.067108864, 1e-12);
  EXPECT_EQ(QpTimeoutSeconds(0), 0.0);  // wait forever
}

TEST(VerbsQpAttrs, DataQpCount) {
  EXPECT_EQ(DataQpCount(1, 1, 1), 1);
  EXPECT_EQ(DataQpCount(2, 1, 2), 4);  // the larger side's count
  EXPECT_EQ(DataQpCount(4, 2, 1), 8);
  EXPECT_EQ(DataQpCount(128, 2, 2), 128);  // capped
}

}  // namespace
}  // namespace railyard::proxy::verbs
