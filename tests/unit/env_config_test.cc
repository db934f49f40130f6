// env/config: defaults, parsing, aliases, errors and the unknown-name warning.
#include "env/config.h"

#include <sys/socket.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "env/log.h"
#include "tests/unit/log_capture.h"

namespace railyard::env {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A fake environment: a map, plus the list of names Parse() sees.
struct FakeEnv {
  std::map<std::string, std::string> vars;

  Lookup lookup() const {
    return [this](const char* name) -> std::optional<std::string> {
      auto it = vars.find(name);
      if (it == vars.end()) return std::nullopt;
      return it->second;
    };
  }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& [k, v] : vars) out.push_back(k);
    return out;
  }
  Status Parse(Config* out) const {
    auto n = names();
    return env::Parse(lookup(), n, out);
  }
};

using railyard::test_support::LogCapture;

Config ParseOk(const FakeEnv& env) {
  Config c;
  Status st = env.Parse(&c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c;
}

Status ParseErr(const FakeEnv& env) {
  Config c;
  c.nsocks = -7;  // sentinel: a failed parse must leave *out unchanged
  Status st = env.Parse(&c);
  EXPECT_EQ(c.nsocks, -7);
  return st;
}

TEST(EnvConfig, TableHasOneRowPerConfigField) {
  std::vector<std::string> names;
  for (const Variable& v : Variables()) names.emplace_back(v.name);
  EXPECT_THAT(names, ::testing::ElementsAre("RAILYARD_SOCKET_IFNAME", "RAILYARD_NSOCKS",
                                            "RAILYARD_NTHREADS", "RAILYARD_CHUNK_BYTES",
                                            "RAILYARD_TIMEOUT_MS", "RAILYARD_ACCEPT_TIMEOUT_MS",
                                            "RAILYARD_ACCEPT_MAX_PENDING", "RAILYARD_DEFAULT_SPEED_MBPS",
                                            "RAILYARD_DEBUG", "RAILYARD_HOST_NAME",
                                            "RAILYARD_DISCOVERY_PORT",
                                            "RAILYARD_DISCOVERY_INTERVAL_MS",
                                            "RAILYARD_DISCOVERY_DEAD_MS",
                                            "RAILYARD_CLUSTER_KEY_FILE", "RAILYARD_FABRIC",
                                            "RAILYARD_RELAY_PORT", "RAILYARD_FABRIC_RELAY_PORT",
                                            "RAILYARD_FABRIC_TCP_RELAY", "RAILYARD_FABRIC_RELAY_VERBS_PORT", "RAILYARD_TIER_TUNNEL_PORT",
                                            "RAILYARD_RELAY_BUFFER_BYTES", "RAILYARD_RELAY_DRAIN_MS",
                                            "RAILYARD_RELAY_IDLE_MS", "RAILYARD_RELAY_MAX_PER_PEER",
                                            "RAILYARD_TRANSPORT", "RAILYARD_COMMS",
                                            "RAILYARD_HCA",
                                            "RAILYARD_GID_INDEX", "RAILYARD_ROCE_VERSION",
                                            "RAILYARD_ADDR_FAMILY", "RAILYARD_ADDR_RANGE",
                                            "RAILYARD_TC", "RAILYARD_SL", "RAILYARD_IB_TIMEOUT",
                                            "RAILYARD_IB_RETRY_CNT", "RAILYARD_QPS_PER_CONN",
                                            "RAILYARD_IB_USE_INLINE", "RAILYARD_STRIPE_THRESHOLD_BYTES",
                                            "RAILYARD_STRIPE_CHUNK_BYTES", "RAILYARD_STRIPE_CHUNKS_PER_RAIL",
                                            "RAILYARD_LIB", "RAILYARD_EXPERT_PIN_CAP",
                                            "RAILYARD_SWAP_DIR", "RAILYARD_SWAP_SYNC", "RAILYARD_XXH3_KERNEL",
                                            "RAILYARD_COLLNET_CHUNK_BYTES", "RAILYARD_COLLNET_SLOTS",
                                            "RAILYARD_COLLNET_SMALL_BYTES", "RAILYARD_COLLNET_SHAPE"));
  for (const Variable& v : Variables()) {
    EXPECT_NE(v.apply, nullptr) << v.name;
    EXPECT_NE(std::string(v.doc), "") << v.name;
  }
}

TEST(EnvConfig, DefaultsComeFromTable) {
  Config c = ParseOk(FakeEnv{});
  EXPECT_EQ(c.socketIfname, "");
  EXPECT_EQ(c.nsocks, 2);
  EXPECT_EQ(c.nthreads, 2);
  EXPECT_EQ(c.chunkBytes, 8388608u);
  EXPECT_EQ(c.timeoutMs, 30000);
  EXPECT_EQ(c.acceptTimeoutMs, 10000);
  EXPECT_EQ(c.acceptMaxPending, 256);
  EXPECT_EQ(c.defaultSpeedMbps, 10000);
  EXPECT_EQ(c.debug, log::Level::kWarn);
  EXPECT_EQ(c.hostName, "");
  EXPECT_EQ(c.discoveryPort, 29517);
  EXPECT_EQ(c.discoveryIntervalMs, 100);
  EXPECT_EQ(c.discoveryDeadMs, 1000);
  EXPECT_EQ(c.clusterKeyFile, "");
  EXPECT_EQ(c.fabric, "auto");
  EXPECT_EQ(c.fabricRelayPort, 29519);
  EXPECT_EQ(c.fabricRelayVerbsPort, 29522);
  EXPECT_EQ(c.relayPort, 29518);
  EXPECT_EQ(c.relayBufferBytes, 1u << 20);
  EXPECT_EQ(c.hca, "");
  EXPECT_EQ(c.gidIndex, -1);
  EXPECT_EQ(c.roceVersion, 2);
  EXPECT_EQ(c.addrFamily, AF_INET);
  EXPECT_EQ(c.addrRange, "");
  EXPECT_EQ(c.trafficClass, -1);
  EXPECT_EQ(c.serviceLevel, -1);
  EXPECT_EQ(c.ibTimeout, 20);
  EXPECT_EQ(c.ibRetryCnt, 7);
  EXPECT_EQ(c.qpsPerConn, 1);
  EXPECT_EQ(c.transport, "auto");
  EXPECT_EQ(c.ibUseInline, 1);
  EXPECT_EQ(c.collnetChunkBytes, 512u * 1024);
  EXPECT_EQ(c.collnetSlots, 8);
}

TEST(EnvConfig, ExpertPinCapTakesSuffixesAndDefaultsTo16G) {
  EXPECT_EQ(ParseOk(FakeEnv{}).expertPinCapBytes, std::size_t{16} << 30);
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_EXPERT_PIN_CAP", "2G"}}}).expertPinCapBytes, std::size_t{2} << 30);
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_EXPERT_PIN_CAP", "0"}}}).expertPinCapBytes, 0u);
  Config out;
  FakeEnv bad{{{"RAILYARD_EXPERT_PIN_CAP", "lots"}}};
  EXPECT_FALSE(bad.Parse(&out).ok());
  // RAILYARD_LIB is the Python binding's: known (no "unknown variable" warning), ignored.
  FakeEnv lib{{{"RAILYARD_LIB", "/opt/x.so"}}};
  EXPECT_TRUE(lib.Parse(&out).ok());
}

TEST(EnvConfig, TransportIsCheckedAndCaseInsensitive) {
  Config c = ParseOk(FakeEnv{{{"RAILYARD_TRANSPORT", "Verbs"}}});
  EXPECT_EQ(c.transport, "verbs");
  Config out;
  FakeEnv bad{{{"RAILYARD_TRANSPORT", "ib"}}};
  Status s = bad.Parse(&out);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("auto, verbs, tcp"), std::string::npos) << s.message();
}

TEST(EnvConfig, FabricModeIsCheckedAndCaseInsensitive) {
  Config c = ParseOk(FakeEnv{{{"RAILYARD_FABRIC", "ON"}}});
  EXPECT_EQ(c.fabric, "on");
  Config out;
  FakeEnv bad{{{"RAILYARD_FABRIC", "maybe"}}};
  Status s = bad.Parse(&out);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("RAILYARD_FABRIC"), std::string::npos) << s.message();
}

TEST(EnvConfig, FabricTcpRelayDefaultsToSpliceAndIsChecked) {
  EXPECT_EQ(ParseOk(FakeEnv{{}}).fabricTcpRelay, "splice");
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_FABRIC_TCP_RELAY", "Forwarder"}}}).fabricTcpRelay, "forwarder");
  Config out;
  FakeEnv bad{{{"RAILYARD_FABRIC_TCP_RELAY", "socket"}}};
  Status s = bad.Parse(&out);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("RAILYARD_FABRIC_TCP_RELAY='socket' is not one of splice, forwarder"), std::string::npos)
      << s.message();
}

TEST(EnvConfig, Xxh3KernelDefaultsToAutoAndIsChecked) {
  EXPECT_EQ(ParseOk(FakeEnv{{}}).xxh3Kernel, "auto");
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_XXH3_KERNEL", "AVX2"}}}).xxh3Kernel, "avx2");
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_XXH3_KERNEL", "portable"}}}).xxh3Kernel, "portable");
  Config out;
  FakeEnv bad{{{"RAILYARD_XXH3_KERNEL", "avx"}}};
  Status s = bad.Parse(&out);
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_EQ(s.message(), "RAILYARD_XXH3_KERNEL='avx' is not one of auto, avx512, avx2, sse2, portable") << s.message();
}

TEST(EnvConfig, EachVariableParsed) {
  FakeEnv env{{{"RAILYARD_SOCKET_IFNAME", "^=eth1,eth2"},
               {"RAILYARD_NSOCKS", "64"},
               {"RAILYARD_NTHREADS", "1"},
               {"RAILYARD_CHUNK_BYTES", "1048576"},
               {"RAILYARD_TIMEOUT_MS", "250"},
               {"RAILYARD_DEFAULT_SPEED_MBPS", "100000"},
               {"RAILYARD_DEBUG", "trace"}}};
  Config c = ParseOk(env);
  EXPECT_EQ(c.socketIfname, "^=eth1,eth2");
  EXPECT_EQ(c.nsocks, 64);
  EXPECT_EQ(c.nthreads, 1);
  EXPECT_EQ(c.chunkBytes, 1048576u);
  EXPECT_EQ(c.timeoutMs, 250);
  EXPECT_EQ(c.defaultSpeedMbps, 100000);
  EXPECT_EQ(c.debug, log::Level::kTrace);
}

TEST(EnvConfig, ByteSuffixesArePowersOf1024) {
  const std::pair<const char*, std::size_t> cases[] = {
      {"4K", 4096}, {"4k", 4096}, {"512K", 524288}, {"2M", 2u << 20}, {"1g", 1u << 30},
      {"4096", 4096}};
  for (const auto& [text, bytes] : cases) {
    Config c = ParseOk(FakeEnv{{{"RAILYARD_CHUNK_BYTES", text}}});
    EXPECT_EQ(c.chunkBytes, bytes) << text;
  }
}

TEST(EnvConfig, LevelsAreCaseInsensitive) {
  const std::pair<const char*, log::Level> cases[] = {{"none", log::Level::kNone},
                                                      {"Version", log::Level::kVersion},
                                                      {"WARN", log::Level::kWarn},
                                                      {"iNfO", log::Level::kInfo},
                                                      {"TRACE", log::Level::kTrace}};
  for (const auto& [text, level] : cases) {
    EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_DEBUG", text}}}).debug, level) << text;
  }
}

TEST(EnvConfig, EmptyValueMeansUnset) {
  FakeEnv env{{{"RAILYARD_NSOCKS", ""}, {"RAILYARD_CHUNK_BYTES", ""}, {"RAILYARD_DEBUG", ""}}};
  Config c = ParseOk(env);
  EXPECT_EQ(c.nsocks, 2);
  EXPECT_EQ(c.chunkBytes, 8388608u);
  EXPECT_EQ(c.debug, log::Level::kWarn);
}

TEST(EnvConfig, MalformedValuesNameVariableValueAndExpectation) {
  struct Case {
    const char* name;
    const char* value;
    const char* expected;
  } cases[] = {
      {"RAILYARD_NSOCKS", "four", "integer in 1..64"},
      {"RAILYARD_NSOCKS", "4x", "integer in 1..64"},
      {"RAILYARD_NSOCKS", " 4", "integer in 1..64"},
      {"RAILYARD_NSOCKS", "-", "integer in 1..64"},
      // A '+' is no part of the syntax (it used to be skipped, so "+-4" read as -4).
      {"RAILYARD_NSOCKS", "+4", "integer in 1..64"},
      {"RAILYARD_NTHREADS", "+-1", "integer in 1..16"},
      {"RAILYARD_CHUNK_BYTES", "+8K", "byte count"},
      {"RAILYARD_NTHREADS", "2.5", "integer in 1..16"},
      {"RAILYARD_TIMEOUT_MS", "1e3", "integer >= 1"},
      {"RAILYARD_CHUNK_BYTES", "512KB", "K, M or G suffix"},
      {"RAILYARD_CHUNK_BYTES", "K", "byte count"},
      {"RAILYARD_CHUNK_BYTES", "1T", "byte count"},
      {"RAILYARD_DEBUG", "LOUD", "NONE, VERSION, WARN, INFO, TRACE"},
      {"RAILYARD_DEBUG", "ABORT", "NONE, VERSION, WARN, INFO, TRACE"},
  };
  for (const Case& c : cases) {
    Status st = ParseErr(FakeEnv{{{c.name, c.value}}});
    EXPECT_EQ(st.code(), Code::kInvalidUsage) << c.name << "=" << c.value;
    EXPECT_THAT(st.message(), HasSubstr(c.name));
    EXPECT_THAT(st.message(), HasSubstr(std::string("'") + c.value + "'"));
    EXPECT_THAT(st.message(), HasSubstr(c.expected));
  }
}

TEST(EnvConfig, OutOfRangeValuesFail) {
  struct Case {
    const char* name;
    const char* value;
  } cases[] = {
      {"RAILYARD_NSOCKS", "0"},          {"RAILYARD_NSOCKS", "65"},
      {"RAILYARD_NTHREADS", "17"},       {"RAILYARD_NTHREADS", "-1"},
      {"RAILYARD_CHUNK_BYTES", "4095"},  {"RAILYARD_CHUNK_BYTES", "2G"},
      {"RAILYARD_CHUNK_BYTES", "1073741825"},
      {"RAILYARD_CHUNK_BYTES", "99999999999999999999"},
      {"RAILYARD_CHUNK_BYTES", "9999999999999G"},
      {"RAILYARD_TIMEOUT_MS", "0"},      {"RAILYARD_TIMEOUT_MS", "2147483648"},
      {"RAILYARD_DEFAULT_SPEED_MBPS", "0"},
      {"RAILYARD_ACCEPT_TIMEOUT_MS", "9"}, {"RAILYARD_ACCEPT_MAX_PENDING", "65"},
  };
  for (const Case& c : cases) {
    Status st = ParseErr(FakeEnv{{{c.name, c.value}}});
    EXPECT_EQ(st.code(), Code::kInvalidUsage) << c.name << "=" << c.value;
    EXPECT_THAT(st.message(), HasSubstr(c.name));
    EXPECT_THAT(st.message(), HasSubstr("out of range"));
  }
  // A row the table shows as ">= min" names its cap when a value passes it.
  EXPECT_THAT(ParseErr(FakeEnv{{{"RAILYARD_TIMEOUT_MS", "2147483648"}}}).message(),
              HasSubstr("(out of range: at most 2147483647)"));
  EXPECT_THAT(ParseErr(FakeEnv{{{"RAILYARD_TIMEOUT_MS", "0"}}}).message(),
              ::testing::AllOf(HasSubstr("an integer >= 1 (out of range)"), Not(HasSubstr("at most"))));
  // A negative byte count is malformed, whatever the range (trial: "-4K" was "out of range").
  EXPECT_THAT(ParseErr(FakeEnv{{{"RAILYARD_CHUNK_BYTES", "-4K"}}}).message(),
              ::testing::AllOf(HasSubstr("RAILYARD_CHUNK_BYTES"), HasSubstr("(a byte count is never negative)"),
                               Not(HasSubstr("out of range"))));
  // Boundaries are inclusive.
  Config c = ParseOk(FakeEnv{{{"RAILYARD_NSOCKS", "1"},
                              {"RAILYARD_NTHREADS", "16"},
                              {"RAILYARD_CHUNK_BYTES", "1G"},
                              {"RAILYARD_TIMEOUT_MS", "2147483647"}}});
  EXPECT_EQ(c.nsocks, 1);
  EXPECT_EQ(c.nthreads, 16);
  EXPECT_EQ(c.chunkBytes, std::size_t{1} << 30);
  EXPECT_EQ(c.timeoutMs, 2147483647);
}

TEST(EnvConfig, CollnetChunkBytesMustBeAMultipleOf8) {
  // It used to be accepted and silently rounded down by the collnet runtime.
  Status st = ParseErr(FakeEnv{{{"RAILYARD_COLLNET_CHUNK_BYTES", "4100"}}});
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_EQ(st.message(),
            "RAILYARD_COLLNET_CHUNK_BYTES='4100' (4100 bytes) is not a multiple of 8: a chunk holds "
            "whole 8-byte elements");  // the variable named once (new-user trial: twice)
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_COLLNET_CHUNK_BYTES", "4104"}}}).collnetChunkBytes, 4104u);
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_COLLNET_CHUNK_BYTES", "1M"}}}).collnetChunkBytes, 1u << 20);
}

// A refused value names its variable once, and an NCCL alias the variable it is read as.
TEST(EnvConfig, ARefusalNamesTheVariableOnceAndAnAliasWhatItIsReadAs) {
  Status st = ParseErr(FakeEnv{{{"RAILYARD_FABRIC", "yes"}}});
  EXPECT_EQ(st.message(), "RAILYARD_FABRIC='yes' is not one of auto, on, off");
  st = ParseErr(FakeEnv{{{"NCCL_IB_ADDR_FAMILY", "x"}}});
  EXPECT_EQ(st.message(), "NCCL_IB_ADDR_FAMILY='x' is not one of AF_INET, AF_INET6 (read as RAILYARD_ADDR_FAMILY)");
}

TEST(EnvConfig, AddrRangeOfTheOtherFamilyIsRefused) {
  // Used to be accepted at parse (and then failed GID selection on every device, or went
  // unnoticed on TCP rails).
  Status st = ParseErr(FakeEnv{{{"RAILYARD_ADDR_RANGE", "fd00::/8"}}});
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_EQ(st.message(),
            "RAILYARD_ADDR_RANGE=fd00::/8 is an IPv6 range but RAILYARD_ADDR_FAMILY=AF_INET (or their "
            "NCCL_IB_ aliases): no GID of that family can lie in it; set RAILYARD_ADDR_FAMILY=AF_INET6 "
            "or give an IPv4 range");
  st = ParseErr(FakeEnv{{{"NCCL_IB_ADDR_FAMILY", "AF_INET6"}, {"RAILYARD_ADDR_RANGE", "10.0.0.0/8"}}});
  EXPECT_THAT(st.message(), HasSubstr("RAILYARD_ADDR_RANGE=10.0.0.0/8 is an IPv4 range but "
                                      "RAILYARD_ADDR_FAMILY=AF_INET6"));
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_ADDR_FAMILY", "AF_INET6"}, {"RAILYARD_ADDR_RANGE", "fd00::/8"}}})
                .addrRange,
            "fd00::/8");
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_ADDR_RANGE", "10.0.0.0/8"}}}).addrRange, "10.0.0.0/8");
}

TEST(EnvConfig, NcclAliasIsUsedWhenOursIsUnset) {
  EXPECT_EQ(ParseOk(FakeEnv{{{"NCCL_SOCKET_IFNAME", "=eth0"}}}).socketIfname, "=eth0");
  // Empty counts as unset for ours too.
  EXPECT_EQ(ParseOk(FakeEnv{{{"RAILYARD_SOCKET_IFNAME", ""}, {"NCCL_SOCKET_IFNAME", "ib"}}})
                .socketIfname,
            "ib");
  // An empty alias is unset as well: the default stays.
  EXPECT_EQ(ParseOk(FakeEnv{{{"NCCL_SOCKET_IFNAME", ""}}}).socketIfname, "");
}

TEST(EnvConfig, OursTakesPrecedenceOverAlias) {
  FakeEnv env{{{"RAILYARD_SOCKET_IFNAME", "eth1"}, {"NCCL_SOCKET_IFNAME", "eth0"}}};
  EXPECT_EQ(ParseOk(env).socketIfname, "eth1");
}

TEST(EnvConfig, AliasIsNotAnUnknownName) {
  LogCapture capture;
  ParseOk(FakeEnv{{{"NCCL_SOCKET_IFNAME", "eth0"}, {"NCCL_DEBUG", "INFO"}}});
  EXPECT_TRUE(capture.At(log::Level::kWarn).empty());
}

TEST(EnvConfig, UnknownNameWarnsWithNearest) {
  LogCapture capture;
  Config c = ParseOk(FakeEnv{{{"RAILYARD_NSOCK", "8"}, {"RAILYARD_CHUNKBYTES", "8K"}}});
  EXPECT_EQ(c.nsocks, 2);  // the misspelt value is ignored
  auto warns = capture.At(log::Level::kWarn);
  ASSERT_EQ(warns.size(), 2u);
  EXPECT_THAT(warns[0], HasSubstr("RAILYARD_CHUNKBYTES"));
  EXPECT_THAT(warns[0], HasSubstr("did you mean RAILYARD_CHUNK_BYTES"));
  EXPECT_THAT(warns[1], HasSubstr("RAILYARD_NSOCK "));
  EXPECT_THAT(warns[1], HasSubstr("did you mean RAILYARD_NSOCKS"));
}

// Issue 8.6: a name in the wrong case, an NCCL name written with RAILYARD_, or a known
// name with a tail all get the hint (they got none before).
TEST(EnvConfig, CaseNcclNamesAndTailsGetSuggestions) {
  EXPECT_STREQ(NearestVariable("RAILYARD_nsocks")->name, "RAILYARD_NSOCKS");
  EXPECT_STREQ(NearestVariable("Railyard_Chunk_Bytes")->name, "RAILYARD_CHUNK_BYTES");
  EXPECT_STREQ(NearestVariable("RAILYARD_DEBUG_LEVEL")->name, "RAILYARD_DEBUG");
  EXPECT_STREQ(NearestVariable("RAILYARD_IB_HCA")->name, "RAILYARD_HCA");
  EXPECT_STREQ(NearestVariable("RAILYARD_IB_QPS_PER_CONNECTION")->name, "RAILYARD_QPS_PER_CONN");
  EXPECT_STREQ(NearestVariable("RAILYARD_IB_GID_INDEX")->name, "RAILYARD_GID_INDEX");
  EXPECT_STREQ(NearestVariable("RAILYARD_SOCKET_NTHREADS")->name, "RAILYARD_NTHREADS");
  EXPECT_STREQ(NearestVariable("RAILYARD_NSOCKS_PERTHREAD")->name, "RAILYARD_NSOCKS");
  EXPECT_STREQ(NearestVariable("RAILYARD_TIMEOUT_MS_MAX")->name, "RAILYARD_TIMEOUT_MS");
  EXPECT_EQ(NearestVariable("RAILYARD_FOO"), nullptr);
  EXPECT_EQ(NearestVariable("RAILYARD_COMPLETELY_DIFFERENT"), nullptr);

  LogCapture capture;
  ParseOk(FakeEnv{{{"RAILYARD_nsocks", "8"}, {"RAILYARD_DEBUG_LEVEL", "INFO"}}});
  auto warns = capture.At(log::Level::kWarn);
  ASSERT_EQ(warns.size(), 2u);
  EXPECT_THAT(warns, ::testing::UnorderedElementsAre(
                         HasSubstr("RAILYARD_nsocks is ignored; did you mean RAILYARD_NSOCKS? (names are case-sensitive)"),
                         HasSubstr("RAILYARD_DEBUG_LEVEL is ignored; did you mean RAILYARD_DEBUG?")));
}

// Issue 8.6: a dead interval at or below the hello interval is refused, naming both.
TEST(EnvConfig, DiscoveryDeadBelowIntervalIsRefused) {
  Status st = ParseErr(FakeEnv{{{"RAILYARD_DISCOVERY_DEAD_MS", "50"}}});  // interval 100
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("RAILYARD_DISCOVERY_DEAD_MS=50 must be larger than "
                                      "RAILYARD_DISCOVERY_INTERVAL_MS=100"));
  st = ParseErr(FakeEnv{{{"RAILYARD_DISCOVERY_INTERVAL_MS", "2000"}}});  // dead 1000 by default
  EXPECT_THAT(st.message(), HasSubstr("RAILYARD_DISCOVERY_DEAD_MS=1000 must be larger than "
                                      "RAILYARD_DISCOVERY_INTERVAL_MS=2000"));
  st = ParseErr(FakeEnv{{{"RAILYARD_DISCOVERY_INTERVAL_MS", "200"}, {"RAILYARD_DISCOVERY_DEAD_MS", "200"}}});
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  Config c = ParseOk(FakeEnv{{{"RAILYARD_DISCOVERY_INTERVAL_MS", "200"}, {"RAILYARD_DISCOVERY_DEAD_MS", "201"}}});
  EXPECT_EQ(c.discoveryDeadMs, 201);
}

// The rail ports must differ: the verbs relay port on the snapshot tunnel's is refused
// naming both; 0 (no verbs relay) collides with nothing.
TEST(EnvConfig, RailPortsThatCollideAreRefused) {
  Status st = ParseErr(FakeEnv{{{"RAILYARD_TIER_TUNNEL_PORT", "29521"}}});  // snapshot at 29522
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  EXPECT_THAT(st.message(), HasSubstr("RAILYARD_FABRIC_RELAY_VERBS_PORT and RAILYARD_TIER_TUNNEL_PORT + 1 "
                                      "(snapshot tunnel) are both port 29522"));
  st = ParseErr(FakeEnv{{{"RAILYARD_FABRIC_RELAY_PORT", "29518"}}});
  EXPECT_THAT(st.message(), HasSubstr("RAILYARD_RELAY_PORT and RAILYARD_FABRIC_RELAY_PORT are both port 29518"));
  Config c = ParseOk(FakeEnv{{{"RAILYARD_FABRIC_RELAY_VERBS_PORT", "0"}, {"RAILYARD_TIER_TUNNEL_PORT", "29521"}}});
  EXPECT_EQ(c.fabricRelayVerbsPort, 0);
}

// Issue 8.3: the rail filter is RAILYARD_SOCKET_IFNAME's own value, never NCCL's.
TEST(EnvConfig, RailFilterIgnoresNcclSocketIfname) {
  Config c = ParseOk(FakeEnv{{{"NCCL_SOCKET_IFNAME", "mgmt0"}}});
  EXPECT_EQ(c.socketIfname, "mgmt0");  // the TCP transport outside fabric mode still honours it
  EXPECT_EQ(c.railIfname, "");
  c = ParseOk(FakeEnv{{{"NCCL_SOCKET_IFNAME", "mgmt0"}, {"RAILYARD_SOCKET_IFNAME", "=p0,p1"}}});
  EXPECT_EQ(c.socketIfname, "=p0,p1");
  EXPECT_EQ(c.railIfname, "=p0,p1");
  c = ParseOk(FakeEnv{{{"RAILYARD_SOCKET_IFNAME", "^mgmt0"}}});
  EXPECT_EQ(c.railIfname, "^mgmt0");
}

TEST(EnvConfig, FarNamesGetNoSuggestionAndToolingNamesNoWarning) {
  LogCapture capture;
  ParseOk(FakeEnv{{{"RAILYARD_FOO", "1"}, {"RAILYARD_SKIP_LANE", "1"}, {"RAILYARD_LANE_TIMEOUT", "5"},
                   {"RAILYARD_CONFORMANCE_TRANSPORT", "verbs"}, {"RAILYARD_UPDATE_DOCS", "1"},
                   {"RAILYARD_BUILD_DIR", "build"}, {"RAILYARD_TEST_BUILD_DIR", "build-test"},
                   {"RAILYARD_FUZZ", "1"}, {"RAILYARD_FUZZ_SECONDS", "5"},
                   {"RAILYARD_TEST_OVERLAP", "0"}}});
  auto warns = capture.At(log::Level::kWarn);
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_THAT(warns[0], HasSubstr("RAILYARD_FOO is ignored"));
  EXPECT_THAT(warns[0], Not(HasSubstr("did you mean")));
}

TEST(EnvConfig, UnknownNameWarnedEvenWhenParseFails) {
  LogCapture capture;
  Status st = ParseErr(FakeEnv{{{"RAILYARD_TIMEOUT", "5"}, {"RAILYARD_NSOCKS", "x"}}});
  EXPECT_EQ(st.code(), Code::kInvalidUsage);
  auto warns = capture.At(log::Level::kWarn);
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_THAT(warns[0], HasSubstr("did you mean RAILYARD_TIMEOUT_MS"));
}

TEST(EnvConfig, ValuesFromEnvironmentLoggedAtInfo) {
  LogCapture capture;
  ParseOk(FakeEnv{{{"NCCL_SOCKET_IFNAME", "eth0"}}});
  EXPECT_THAT(capture.At(log::Level::kInfo),
              ::testing::Contains(HasSubstr(
                  "NCCL_SOCKET_IFNAME (alias of RAILYARD_SOCKET_IFNAME) set by environment to 'eth0'")));
}

TEST(EnvConfig, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("abc", ""), 3u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("RAILYARD_NSOCK", "RAILYARD_NSOCKS"), 1u);
  EXPECT_STREQ(NearestVariable("RAILYARD_DEBUGG")->name, "RAILYARD_DEBUG");
  EXPECT_STREQ(NearestVariable("RAILYARD_THREADS")->name, "RAILYARD_NTHREADS");
}

TEST(EnvConfig, LoadReadsProcessEnvironmentOnceAndCachesIt) {
  // Only this test calls Load() in this binary, so the first call sees these values.
  ASSERT_EQ(setenv("RAILYARD_NSOCKS", "7", 1), 0);
  ASSERT_EQ(setenv("RAILYARD_NSOKCS_TYPO", "1", 1), 0);
  LogCapture capture;
  const Config* first = nullptr;
  Status st = Load(&first);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->nsocks, 7);
  EXPECT_THAT(capture.At(log::Level::kWarn),
              ::testing::Contains(HasSubstr("RAILYARD_NSOKCS_TYPO")));
  // Changing the environment afterwards has no effect: parsed once.
  ASSERT_EQ(setenv("RAILYARD_NSOCKS", "9", 1), 0);
  const Config* second = nullptr;
  ASSERT_TRUE(Load(&second).ok());
  EXPECT_EQ(second, first);
  EXPECT_EQ(second->nsocks, 7);
  unsetenv("RAILYARD_NSOCKS");
  unsetenv("RAILYARD_NSOKCS_TYPO");
}

TEST(EnvConfig, LoadCachesAFailure) {
  // "threadsafe" re-executes the binary for the child, so its Load() is fresh.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("RAILYARD_NTHREADS", "99", 1);
        const Config* c = nullptr;
        Status first = Load(&c);
        unsetenv("RAILYARD_NTHREADS");  // too late: the failure is cached
        Status second = Load(&c);
        bool ok = first.code() == Code::kInvalidUsage &&
                  first.message().find("RAILYARD_NTHREADS='99'") != std::string::npos &&
                  second.code() == first.code() && second.message() == first.message() &&
                  c == nullptr;
        // Load() itself logs nothing (env_load_logs_once_test); a caller reports it.
        std::fprintf(stderr, "%s\n", first.message().c_str());
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "RAILYARD_NTHREADS='99'");
}

TEST(EnvConfig, RailyardNamesInEnvironment) {
  ASSERT_EQ(setenv("RAILYARD_ZZ_PROBE", "x", 1), 0);
  ASSERT_EQ(setenv("NOT_RAILYARD_PROBE", "x", 1), 0);
  auto names = RailyardNamesInEnvironment();
  EXPECT_THAT(names, ::testing::Contains("RAILYARD_ZZ_PROBE"));
  EXPECT_THAT(names, ::testing::Not(::testing::Contains("NOT_RAILYARD_PROBE")));
  unsetenv("RAILYARD_ZZ_PROBE");
  unsetenv("NOT_RAILYARD_PROBE");
}

TEST(EnvLog, LevelNames) {
  EXPECT_EQ(log::ParseLevelName("info"), log::Level::kInfo);
  EXPECT_EQ(log::ParseLevelName("INFO "), std::nullopt);
  EXPECT_EQ(log::ParseLevelName(""), std::nullopt);
  EXPECT_STREQ(log::LevelName(log::Level::kTrace), "TRACE");
}

// An NCCL logger receives (level, subsys, basename, line, "%s", message).
struct LoggerCall {
  int level = -1;
  unsigned long flags = 0;
  std::string file, fmt, message;
  int line = 0;
};
LoggerCall gLastCall;
int gCalls = 0;
void FakeNcclLogger(int level, unsigned long flags, const char* file, int line, const char* fmt,
                    ...) {
  va_list args;
  va_start(args, fmt);
  char buf[256];
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  gLastCall = {level, flags, file, fmt, buf, line};
  ++gCalls;
}

TEST(EnvLog, NcclLoggerGetsLevelSubsysAndFormattedMessage) {
  log::SetNcclLogger(&FakeNcclLogger);
  gCalls = 0;
  log::SetStderrLevel(log::Level::kNone);  // NCCL filters, not us
  EXPECT_TRUE(log::Enabled(log::Level::kTrace));
  int line = __LINE__ + 1;
  RY_INFO(log::kNet | log::kInit, "dev %d is %s", 3, "eth0");
  log::SetNcclLogger(nullptr);
  log::SetStderrLevel(log::Level::kWarn);
  ASSERT_EQ(gCalls, 1);
  EXPECT_EQ(gLastCall.level, 3);
  EXPECT_EQ(gLastCall.flags, 0x11ul);
  EXPECT_EQ(gLastCall.file, "env_config_test.cc");
  EXPECT_EQ(gLastCall.line, line);
  EXPECT_EQ(gLastCall.fmt, "%s");
  EXPECT_EQ(gLastCall.message, "dev 3 is eth0");
}

// A WARN reaches NCCL's logger with every subsystem bit, as NCCL's own WARN: NCCL drops
// a line whose flags miss NCCL_DEBUG_SUBSYS's mask at every level, and its default mask
// (INIT|BOOTSTRAP|ENV = 0x1081) hid the plugin's warnings while they were flagged NET.
TEST(EnvLog, AWarnCarriesEverySubsystemSoNcclsDefaultMaskShowsIt) {
  log::SetNcclLogger(&FakeNcclLogger);
  gCalls = 0;
  RY_WARN("rail %d went down", 1);
  log::SetNcclLogger(nullptr);
  ASSERT_EQ(gCalls, 1);
  EXPECT_EQ(gLastCall.level, 2);
  EXPECT_EQ(gLastCall.flags, ~0ul);
  EXPECT_NE(gLastCall.flags & 0x1081ul, 0ul);
  EXPECT_EQ(gLastCall.message, "rail 1 went down");
}

TEST(EnvLog, StderrThreshold) {
  log::SetStderrLevel(log::Level::kWarn);
  EXPECT_TRUE(log::Enabled(log::Level::kWarn));
  EXPECT_TRUE(log::Enabled(log::Level::kAbort));
  EXPECT_FALSE(log::Enabled(log::Level::kInfo));
  EXPECT_FALSE(log::Enabled(log::Level::kNone));
  log::SetStderrLevel(log::Level::kTrace);
  EXPECT_TRUE(log::Enabled(log::Level::kTrace));
  log::SetStderrLevel(log::Level::kNone);
  EXPECT_FALSE(log::Enabled(log::Level::kWarn));
  testing::internal::CaptureStderr();
  log::SetStderrLevel(log::Level::kWarn);
  RY_WARN("disk %s is full", "sda");
  RY_INFO(log::kNet, "not shown");
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_THAT(err, ::testing::MatchesRegex(
                       "railyard WARN \\[pid [0-9]+\\] env_config_test\\.cc:[0-9]+ disk sda is full\n"));
}

TEST(EnvLog, LongMessagesAreNotTruncated) {
  LogCapture capture;
  std::string big(5000, 'x');
  RY_WARN("%s!", big.c_str());
  auto warns = capture.At(log::Level::kWarn);
  ASSERT_EQ(warns.size(), 1u);
  EXPECT_EQ(warns[0], big + "!");
}

}  // namespace
}  // namespace railyard::env
