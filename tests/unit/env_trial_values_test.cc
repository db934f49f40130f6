// Trial D14 and D15 (a new user's trial): device lists take NCCL's forms only, and the
// expert pin cap's range reads the same in the error, the table and the code.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "env/config.h"
#include "env/device_list_syntax.h"
#include "tests/unit/parse_env.h"

namespace railyard {
namespace {

using ::testing::HasSubstr;
using test_support::ParseEnv;

// NCCL's documented forms (NCCL_SOCKET_IFNAME / NCCL_IB_HCA: prefix list, ^ excludes,
// = exact, ^= both; name:port) are taken as they are.
TEST(DeviceListSyntax, NcclFormsAreAccepted) {
  for (const char* v : {"eth", "=eth0", "^docker", "^=docker0,virbr0", "eth0,eth1", "mlx5_0:1", "^mlx5_1:1,mlx5_2",
                        "=mlx5_0:1,mlx5_1:2", "e", "eth0,", "lo"}) {
    EXPECT_TRUE(env::CheckDeviceListSyntax(v, "RAILYARD_SOCKET_IFNAME").ok()) << v;
  }
  EXPECT_TRUE(env::CheckDeviceListSyntax("", "RAILYARD_SOCKET_IFNAME").ok());  // unset
}

// An RDMA port that is not 1..255 in decimal is refused (new-user trial: "mlx5_0:x",
// "mlx5_0:" and "mlx5_0:99999999999" were taken, as NCCL's atoi reads them: port 0 or
// garbage, a device that then silently never matched). NCCL's third field stays ignored.
TEST(DeviceListSyntax, AnHcaPortThatIsNoPortNumberIsRefused) {
  for (const char* v : {"mlx5_0:x", "mlx5_0:", "mlx5_0:0", "mlx5_0:256", "mlx5_0:99999999999", "=mlx5_0:1,mlx5_1:-1"}) {
    const Status st = env::CheckDeviceListSyntax(v, "RAILYARD_HCA");
    EXPECT_EQ(st.code(), Code::kInvalidUsage) << v;
    EXPECT_THAT(st.message(), HasSubstr("not an RDMA port number (1..255)")) << v << ": " << st.message();
  }
  for (const char* v : {"mlx5_0:1", "mlx5_0:255", "=mlx5_0:1,mlx5_1:2", "mlx5_0:1:2", "^mlx5_1:1"}) {
    EXPECT_TRUE(env::CheckDeviceListSyntax(v, "RAILYARD_HCA").ok()) << v;
  }
  EXPECT_TRUE(env::CheckDeviceListSyntax("eth0:x", "RAILYARD_SOCKET_IFNAME").ok());  // interfaces have no ports
}

// They were taken: "^" as automatic, "^=" as "exclude nothing" (no interface at all),
// "=^eth0" as the exact name "^eth0", "eth0,^docker" as a prefix "^docker" matching nothing.
TEST(DeviceListSyntax, AHeaderWithoutANameOrAMisplacedCaretIsRefused) {
  struct Case {
    const char* value;
    const char* says;
  } cases[] = {
      {"^", "'^' with no name after it"},   {"=", "'=' with no name after it"},
      {"^=", "'^=' with no name after it"}, {"^,", "'^' with no name after it"},
      {"=:1", "'=' with no name after it"}, {",", "no interface or device name"},
      {"=^eth0", "'^' may only lead the list"}, {"^^eth0", "'^' may only lead the list"},
      {"==eth0", "'=' may only lead the list"}, {"eth0,^docker", "'^' may only lead the list"},
      {"^=eth0,=eth1", "'=' may only lead the list"},
  };
  for (const Case& c : cases) {
    for (const char* var : {"RAILYARD_SOCKET_IFNAME", "RAILYARD_HCA"}) {
      Status st;
      ParseEnv({{var, c.value}}, &st);
      EXPECT_EQ(st.code(), Code::kInvalidUsage) << var << "=" << c.value;
      EXPECT_THAT(st.message(), HasSubstr(std::string(var) + "='" + c.value + "'")) << st.message();
      EXPECT_THAT(st.message(), HasSubstr(c.says)) << st.message();
      // The examples are of the list's kind: RDMA devices for RAILYARD_HCA (new-user trial).
      EXPECT_THAT(st.message(), HasSubstr(std::string(var) == "RAILYARD_HCA" ? "NCCL's forms: mlx5, =mlx5_0:1, ^mlx5_1"
                                                                              : "NCCL's forms: eth, =eth0, ^docker, ^=docker0"))
          << st.message();
    }
    // NCCL's own names keep NCCL's reading (NCCL 2.28.9 runs with these values, so a job
    // must not fail at this plugin's init): accepted verbatim, with a WARN.
    Status st;
    const env::Config nc = ParseEnv({{"NCCL_SOCKET_IFNAME", c.value}, {"NCCL_IB_HCA", c.value}}, &st);
    EXPECT_TRUE(st.ok()) << c.value << ": " << st.message();
    EXPECT_EQ(nc.socketIfname, c.value);
    EXPECT_EQ(nc.hca, c.value);
  }
  // The forms that work still parse into the Config.
  Status st;
  const env::Config c = ParseEnv({{"RAILYARD_SOCKET_IFNAME", "^=mgmt0"}, {"RAILYARD_HCA", "=mlx5_0:1"}}, &st);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(c.railIfname, "^=mgmt0");
  EXPECT_EQ(c.hca, "=mlx5_0:1");
}

const env::Variable& Row(const char* name) {
  for (const env::Variable& v : env::Variables()) {
    if (std::string(v.name) == name) return v;
  }
  ADD_FAILURE() << name << " not in the table";
  return env::Variables().front();
}

// The error said "a byte count in 0..1125899906842624 (0..1048576G)", as if 0 were the
// smallest cap rather than "no cap"; message and table now read the row's own text, and
// that text names the row's real bounds.
TEST(ExpertPinCapRange, MessageTableAndCodeAgree) {
  const env::Variable& v = Row("RAILYARD_EXPERT_PIN_CAP");
  ASSERT_NE(v.accepted, nullptr);
  const std::string accepted = v.accepted;
  EXPECT_EQ(v.minValue, 0);
  EXPECT_EQ(v.maxValue, std::int64_t{1} << 50);
  EXPECT_THAT(accepted, HasSubstr("0 (no cap)"));
  EXPECT_THAT(accepted, HasSubstr("1.." + std::to_string(v.maxValue)));
  EXPECT_THAT(accepted, HasSubstr("1048576G"));

  Status st;
  ParseEnv({{"RAILYARD_EXPERT_PIN_CAP", "1048577G"}}, &st);
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("a byte count in " + accepted));
  EXPECT_THAT(st.message(), HasSubstr("out of range"));
  const env::Config at = ParseEnv({{"RAILYARD_EXPERT_PIN_CAP", "1048576G"}}, &st);  // the bound itself
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(at.expertPinCapBytes, std::uint64_t{1} << 50);

  const std::string md = env::RenderMarkdown();
  EXPECT_THAT(md, HasSubstr("| `RAILYARD_EXPERT_PIN_CAP` | bytes | `16G` | bytes | " + accepted + " |"));
}

}  // namespace
}  // namespace railyard
