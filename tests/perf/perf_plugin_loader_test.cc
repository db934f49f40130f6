// Plugin loading as NCCL 2.28.9 does it: value resolution, symbol versions,
// init failure handling, device checks. Uses the fake plugins in fake_plugin/.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tools/railyard-perf/nccl_logger.h"
#include "tools/railyard-perf/plugin_loader.h"

namespace railyard::perf {
namespace {

const std::string kDir = RAILYARD_FAKE_PLUGIN_DIR;
std::string Lib(const char* ver) { return kDir + "/libnccl-net-fake" + ver + ".so"; }

std::vector<std::string> Tries(const PluginCandidate& c) { return c.tries; }

TEST(PerfPluginValue, UnsetMeansLibncclNet) {
  PluginSpec s = ResolvePluginValue(std::nullopt);
  EXPECT_TRUE(s.isDefault);
  ASSERT_EQ(s.candidates.size(), 1u);
  EXPECT_EQ(Tries(s.candidates[0]), std::vector<std::string>{"libnccl-net.so"});
  EXPECT_TRUE(ResolvePluginValue(std::string()).isDefault);
}

TEST(PerfPluginValue, NameFileAndPath) {
  PluginSpec s = ResolvePluginValue(std::string("railyard"));
  ASSERT_EQ(s.candidates.size(), 1u);
  EXPECT_EQ(Tries(s.candidates[0]), (std::vector<std::string>{"railyard", "libnccl-net-railyard.so"}));
  s = ResolvePluginValue(std::string("libnccl-net-railyard.so"));
  EXPECT_EQ(Tries(s.candidates[0]), std::vector<std::string>{"libnccl-net-railyard.so"});
  s = ResolvePluginValue(std::string("/opt/x/libnccl-net-foo.so"));
  EXPECT_EQ(Tries(s.candidates[0]), std::vector<std::string>{"/opt/x/libnccl-net-foo.so"});
  s = ResolvePluginValue(std::string("lib/foo"));  // a '/' means a path: no fallback name
  EXPECT_EQ(Tries(s.candidates[0]), std::vector<std::string>{"lib/foo"});
}

TEST(PerfPluginValue, CommaListInOrder) {
  PluginSpec s = ResolvePluginValue(std::string("a,/p/libb.so,,libc.so"));
  ASSERT_EQ(s.candidates.size(), 3u);
  EXPECT_EQ(Tries(s.candidates[0]), (std::vector<std::string>{"a", "libnccl-net-a.so"}));
  EXPECT_EQ(Tries(s.candidates[1]), std::vector<std::string>{"/p/libb.so"});
  EXPECT_EQ(Tries(s.candidates[2]), std::vector<std::string>{"libc.so"});
  std::string many;
  for (int i = 0; i < 20; ++i) many += "p" + std::to_string(i) + ",";
  s = ResolvePluginValue(many);
  EXPECT_EQ(s.candidates.size(), std::size_t(kMaxExternalPlugins));
  EXPECT_FALSE(s.notes.empty());
  s = ResolvePluginValue(std::string(300, 'x') + ",ok");
  ASSERT_EQ(s.candidates.size(), 1u);
  EXPECT_EQ(s.candidates[0].entry, "ok");
}

TEST(PerfPluginValue, NoneIsCaseInsensitive) {
  for (const char* v : {"none", "NONE", "None", "nOnE"}) {
    PluginSpec s = ResolvePluginValue(std::string(v));
    EXPECT_TRUE(s.none) << v;
    EXPECT_TRUE(s.candidates.empty()) << v;
  }
  EXPECT_FALSE(ResolvePluginValue(std::string("nonexistent")).none);
}

TEST(PerfPluginValue, StaticPluginPrefix) {
  EXPECT_TRUE(ResolvePluginValue(std::string("STATIC_PLUGIN")).candidates[0].staticPlugin);
  EXPECT_TRUE(ResolvePluginValue(std::string("static")).candidates[0].staticPlugin);
  EXPECT_FALSE(ResolvePluginValue(std::string("static_plugins")).candidates[0].staticPlugin);
}

/// Temporary FAKE_NET_LOG file plus helpers; restores the knobs afterwards.
class PerfPluginLoad : public ::testing::Test {
 protected:
  void SetUp() override {
    log_ = ::testing::TempDir() + "fake_net_" + std::to_string(getpid()) + ".log";
    std::remove(log_.c_str());
    setenv("FAKE_NET_LOG", log_.c_str(), 1);
  }
  void TearDown() override {
    for (const char* v : {"FAKE_NET_LOG", "FAKE_NET_INIT_FAIL", "FAKE_NET_NDEV", "FAKE_NET_DEVTYPE"}) unsetenv(v);
    std::remove(log_.c_str());
  }
  std::string Calls() {
    std::ifstream f(log_);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  }
  Status Open(const std::string& value, OpenedNet* out, std::optional<std::string> netName = std::nullopt) {
    OpenRequest req;
    req.value = value;
    req.netName = std::move(netName);
    req.commId = 42;
    std::vector<std::string> log;
    Status s = OpenNetPlugin(req, out, &log);
    for (const auto& l : log) log_lines_ += l + "\n";
    return s;
  }
  std::string log_;
  std::string log_lines_;
};

TEST_F(PerfPluginLoad, LoadsV11AndFinalizes) {
  OpenedNet n;
  Status s = Open(Lib("11"), &n);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(n.symbol, "ncclNetPlugin_v11");
  EXPECT_EQ(n.net->version(), 11);
  EXPECT_STREQ(n.net->name(), "Fake11");
  EXPECT_EQ(n.ndev, 2);
  EXPECT_NE(n.path.find("libnccl-net-fake11.so"), std::string::npos);
  ncclNetProperties_v11_t p;
  ASSERT_EQ(n.net->getProperties(1, &p), ncclSuccess);
  EXPECT_EQ(p.speed, 12345);
  EXPECT_EQ(n.Close(), ncclSuccess);
  EXPECT_EQ(Calls(), "init\ndevices\nfinalize\n");
}

TEST_F(PerfPluginLoad, V8IsWidenedToV11Properties) {
  OpenedNet n;
  Status s = Open(Lib("8"), &n);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(n.symbol, "ncclNetPlugin_v8");
  ncclNetProperties_v11_t p;
  ASSERT_EQ(n.net->getProperties(1, &p), ncclSuccess);
  EXPECT_EQ(p.speed, 12345);  // v8 puts speed 4 bytes earlier: converted, not copied
  EXPECT_EQ(p.port, 1);
  EXPECT_EQ(p.maxComms, 1024);
  EXPECT_EQ(p.forceFlush, 0);
  EXPECT_EQ(p.vProps.ndevs, 1);
  EXPECT_EQ(p.vProps.devs[0], 1);
  EXPECT_EQ(p.maxP2pBytes, std::size_t{1} << 30);
  EXPECT_EQ(p.maxMultiRequestSize, 1);
  EXPECT_EQ(n.net->isend(nullptr, nullptr, (std::size_t{1} << 30) + 1, 0, nullptr, nullptr), ncclInternalError);
  n.Close();
  EXPECT_EQ(Calls(), "init\ndevices\n");  // older versions get no finalize, as in NCCL's shims
}

// Issue 8.6: NCCL 2.28.9 loads v7 and v6 tables (fact sheet §1.3); railyard-perf refused them.
TEST_F(PerfPluginLoad, V7AndV6LoadAndAreWidenedAsNcclShimsDo) {
  for (const char* ver : {"7", "6"}) {
    SCOPED_TRACE(ver);
    OpenedNet n;
    Status s = Open(Lib(ver), &n);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(n.symbol, std::string("ncclNetPlugin_v") + ver);
    EXPECT_EQ(n.net->version(), std::atoi(ver));
    EXPECT_STREQ(n.net->name(), (std::string("Fake") + ver).c_str());
    EXPECT_EQ(n.ndev, 2);
    ncclNetProperties_v11_t p;
    ASSERT_EQ(n.net->getProperties(1, &p), ncclSuccess);
    EXPECT_EQ(p.speed, 12345);  // v7/v6 put speed at offset 28: converted, not copied
    EXPECT_EQ(p.port, 1);
    EXPECT_EQ(p.maxComms, 1024);
    EXPECT_EQ(p.maxRecvs, 1);
    EXPECT_EQ(p.regIsGlobal, 0);
    EXPECT_EQ(p.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p.vProps.ndevs, 1);
    EXPECT_EQ(p.vProps.devs[0], 1);
    EXPECT_EQ(p.maxP2pBytes, std::size_t{1} << 30);
    void* mh = nullptr;
    EXPECT_EQ(n.net->regMr(nullptr, nullptr, std::size_t{1} << 31, NCCL_PTR_HOST, &mh), ncclInternalError);
    n.Close();
    EXPECT_EQ(Calls(), "init\ndevices\n");  // no finalize below v11, as in NCCL's shims
    std::remove(log_.c_str());
  }
  // v7 reports its own device type; a GIN type is refused as for every version.
  setenv("FAKE_NET_DEVTYPE", "2", 1);
  OpenedNet n;
  Status s = Open(Lib("7"), &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("netDeviceType = 2"), std::string::npos) << s.message();
  // v6 has no device type: HOST, as NCCL's shim says.
  s = Open(Lib("6"), &n);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST_F(PerfPluginLoad, InitFailureStillCallsFinalize) {
  setenv("FAKE_NET_INIT_FAIL", "1", 1);
  OpenedNet n;
  Status s = Open(Lib("11"), &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("init failed: ncclSystemError"), std::string::npos) << s.message();
  EXPECT_EQ(Calls(), "init\nfinalize\n");  // the fake sets *ctx before failing
  // The one candidate is the headline: its cause is said once, with no candidate list.
  const std::string cause = "init failed: ncclSystemError (2)";
  const size_t first = s.message().find(cause);
  ASSERT_NE(first, std::string::npos) << s.message();
  EXPECT_EQ(s.message().find(cause, first + 1), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("every candidate"), std::string::npos) << s.message();
}

// A plugin that loads and fails its init: the headline says so and quotes the plugin's
// first WARN; it used to open with the "not found" lines of the other candidates.
TEST_F(PerfPluginLoad, InitFailureHeadlineQuotesThePluginsWarn) {
  setenv("FAKE_NET_INIT_FAIL", "1", 1);
  OpenRequest req;
  req.value = "/nonexistent/libnccl-net-x.so," + Lib("11");
  req.logger = NcclLogger;
  OpenedNet n;
  std::vector<std::string> log;
  Status s = OpenNetPlugin(req, &n, &log);
  ASSERT_FALSE(s.ok());
  const std::string head = s.message().substr(0, s.message().find('\n'));
  const std::string want_start = "net plugin init failed (NCCL_NET_PLUGIN='" + *req.value + "'): ";
  const std::string want_end = "libnccl-net-fake11.so (ncclNetPlugin_v11, name \"Fake11\"): init failed: "
                               "ncclSystemError (2): fake: init refused (FAKE_NET_INIT_FAIL=1)";  // finalize
                               // succeeded: not mentioned (it read like a second error)
  EXPECT_EQ(head.rfind(want_start, 0), 0u) << head;
  ASSERT_GE(head.size(), want_end.size()) << head;
  EXPECT_EQ(head.substr(head.size() - want_end.size()), want_end) << head;
  EXPECT_NE(s.message().find("\n  - '/nonexistent/libnccl-net-x.so': not found"), std::string::npos) << s.message();
}

TEST_F(PerfPluginLoad, CommaListFirstLoadableWins) {
  OpenedNet n;
  Status s = Open("/nonexistent/libnccl-net-x.so," + Lib("0") + "," + Lib("5") + "," + Lib("8"), &n);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(n.symbol, "ncclNetPlugin_v8");
  EXPECT_NE(log_lines_.find("unsupported"), std::string::npos) << log_lines_;
  EXPECT_NE(log_lines_.find("ncclNetPlugin_v5"), std::string::npos) << log_lines_;
}

TEST_F(PerfPluginLoad, UnsupportedAndMissing) {
  OpenedNet n;
  Status s = Open(Lib("5"), &n);  // NCCL 2.28.9 loads v6 and newer only (fact sheet §1.3)
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unsupported"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("NCCL 2.28.9 loads v6 or newer"), std::string::npos) << s.message();
  s = Open("none", &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("none"), std::string::npos);
  s = Open("definitely-not-a-plugin", &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("libnccl-net-definitely-not-a-plugin.so"), std::string::npos) << s.message();
}

// A name that loads nothing: each entry once, each file dlopen was asked for once, and the
// source named as given (it said "foo: foo: cannot open ..." per file, and NCCL_NET_PLUGIN
// for a --plugin value).
TEST_F(PerfPluginLoad, MissingNamesAreListedOnceEachWithTheirFiles) {
  auto count = [](const std::string& hay, const std::string& needle) {
    size_t n = 0;
    for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + needle.size())) ++n;
    return n;
  };
  OpenedNet n;
  Status s = Open("nope-a,/nonexistent/libx.so", &n);
  ASSERT_FALSE(s.ok());
  const std::string m = s.message();
  EXPECT_NE(m.find("(NCCL_NET_PLUGIN='nope-a,/nonexistent/libx.so'):"), std::string::npos) << m;
  EXPECT_NE(m.find("\n  - 'nope-a': not found: tried nope-a, libnccl-net-nope-a.so (dlopen searched LD_LIBRARY_PATH="),
            std::string::npos) << m;
  EXPECT_NE(m.find("\n  - '/nonexistent/libx.so': not found: tried /nonexistent/libx.so\n"), std::string::npos) << m;
  EXPECT_EQ(count(m, "libnccl-net-nope-a.so"), 1u) << m;
  EXPECT_EQ(count(m, "/nonexistent/libx.so"), 3u) << m;  // the value, the entry, the one file tried
  EXPECT_EQ(m.find("nope-a: nope-a"), std::string::npos) << m;
  EXPECT_EQ(count(m, "\n  - "), 2u) << m;  // one line per entry

  OpenRequest req;
  req.value = "nope-b";
  req.source = "--plugin";
  std::vector<std::string> log;
  s = OpenNetPlugin(req, &n, &log);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("(--plugin='nope-b'):"), std::string::npos) << s.message();
}

TEST_F(PerfPluginLoad, DevicesAndDeviceTypeChecks) {
  setenv("FAKE_NET_NDEV", "0", 1);
  OpenedNet n;
  Status s = Open(Lib("11"), &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("reported 0 devices"), std::string::npos) << s.message();
  EXPECT_EQ(Calls(), "init\ndevices\nfinalize\n");
  setenv("FAKE_NET_NDEV", "1", 1);
  setenv("FAKE_NET_DEVTYPE", "2", 1);  // GIN proxy: NCCL refuses it as a net plugin
  s = Open(Lib("11"), &n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("netDeviceType = 2"), std::string::npos) << s.message();
}

TEST_F(PerfPluginLoad, OnlyVersionPicksOneTable) {
  OpenRequest req;
  req.value = Lib("8");
  req.onlyVersion = 11;
  std::vector<std::string> log;
  OpenedNet n;
  Status s = OpenNetPlugin(req, &n, &log);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no ncclNetPlugin_v11 symbol"), std::string::npos) << s.message();
  req.onlyVersion = 8;
  s = OpenNetPlugin(req, &n, &log);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(n.net->version(), 8);
}

TEST_F(PerfPluginLoad, NcclNetMustMatchTheName) {
  OpenedNet n;
  Status s = Open(Lib("11"), &n, std::string("IB"));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("NCCL_NET=IB"), std::string::npos) << s.message();
  // The hint names the setting to change, NCCL_NET, not the NCCL_NET_PLUGIN in use.
  EXPECT_NE(s.message().find("hint: NCCL_NET='IB' makes NCCL use only a network of that name"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("hint: the Railyard plugin beside"), std::string::npos) << s.message();
  s = Open(Lib("11"), &n, std::string("fake11"));  // case-insensitive
  EXPECT_TRUE(s.ok()) << s.message();
}

}  // namespace
}  // namespace railyard::perf
