// Conformance: how NCCL finds the library (nccl-net-abi.md §1.2-§1.3) and what it
// reads from the tables before any connection (§1.4, §2.2-§2.4): loading by name,
// by path and through LD_PRELOAD in fresh processes, the shape of every exported
// table, and getProperties writing every field of every version's struct.
#include <limits.h>
#include <stdlib.h>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <dlfcn.h>

#include "plugin/abi/gin_v11.h"
#include "plugin/abi/rma_v13.h"
#include "plugin/abi/rma_v14.h"
#include "tests/conformance/harness.h"

#ifndef RAILYARD_LOADER_PATH
#error "RAILYARD_LOADER_PATH must be defined by tests/conformance/CMakeLists.txt"
#endif

namespace railyard::conformance {
namespace {

std::string RealPath(const std::string& p) {
  char buf[PATH_MAX];
  return realpath(p.c_str(), buf) != nullptr ? buf : p;
}

/// Runs the loader helper with the transport's environment plus `extra`.
ExecResult Load(const std::vector<std::string>& args, const EnvList& extra,
                const std::vector<std::string>& unset) {
  EnvList env = PluginEnv(3000);
  env.insert(env.end(), extra.begin(), extra.end());
  std::vector<std::string> argv = {RAILYARD_LOADER_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunExecutable(argv, env, unset, Ms(20000));
}

/// Checks the loader found the built library and that name, init, devices,
/// getProperties(0) and finalize all worked.
void ExpectWorkingPlugin(const ExecResult& r) {
  ASSERT_TRUE(r.started);
  ASSERT_FALSE(r.timedOut) << r.output;
  EXPECT_EQ(r.signal, 0) << r.output;
  EXPECT_EQ(r.exitCode, 0) << r.output;
  EXPECT_NE(r.output.find("lib=" + RealPath(PluginPath()) + "\n"), std::string::npos)
      << "the table did not come from " << PluginPath() << ":\n" << r.output;
  EXPECT_NE(r.output.find("name=Railyard\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("init=0\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ndev=0\n"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("ndev=-1\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ndev="), std::string::npos) << r.output;
  if (TransportName() == "tcp") {
    EXPECT_NE(r.output.find("dev0=lo\n"), std::string::npos)
        << "device 0 is not the loopback interface:\n" << r.output;
  }
  EXPECT_NE(r.output.find("devtype=0\n"), std::string::npos) << "not NCCL_NET_DEVICE_HOST:\n"
                                                             << r.output;
  EXPECT_NE(r.output.find("finalize=0\n"), std::string::npos) << r.output;
}

// Proves NCCL_NET_PLUGIN=railyard works: in a fresh process whose LD_LIBRARY_PATH
// holds the library's directory, NCCL's lookup (dlopen("railyard") fails, then
// dlopen("libnccl-net-railyard.so")) finds the built library, and its v11 table
// says "Railyard", initialises and reports devices.
// Under AddressSanitizer the ASan runtime must come first in a process's link
// map; a preloaded instrumented library needs it preloaded ahead of itself.
// Returns "<path of the libasan this test runs with>:" then, else "".
std::string SanitizerRuntime() {
#if defined(__SANITIZE_ADDRESS__)
  FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) return "";
  char line[4096];
  std::string found;
  while (found.empty() && std::fgets(line, sizeof line, maps) != nullptr) {
    const char* slash = std::strchr(line, '/');
    if (slash != nullptr && std::strstr(slash, "/libasan.so") != nullptr) {
      found = slash;
      found.erase(found.find_last_not_of("\n") + 1);
    }
  }
  std::fclose(maps);
  return found.empty() ? "" : found + ":";
#else
  return "";
#endif
}

TEST(ConformanceLoading, ByNameThroughLdLibraryPath) {
  ExecResult r = Load({"name", "railyard"}, {{"LD_LIBRARY_PATH", PluginDir()}}, {"LD_PRELOAD"});
  ExpectWorkingPlugin(r);
  EXPECT_NE(r.output.find("first_try="), std::string::npos)
      << "dlopen(\"railyard\") unexpectedly succeeded:\n" << r.output;
  // NCCL_NET_PLUGIN=libnccl-net-railyard.so is dlopen'ed as given.
  ExpectWorkingPlugin(
      Load({"name", "libnccl-net-railyard.so"}, {{"LD_LIBRARY_PATH", PluginDir()}}, {"LD_PRELOAD"}));
}

// Proves the name lookup above really depends on LD_LIBRARY_PATH (the control for
// the previous test): without it, the library is not found and nothing crashes.
TEST(ConformanceLoading, ByNameWithoutLibraryPathIsNotFound) {
  ExecResult r = Load({"name", "railyard"}, {}, {"LD_LIBRARY_PATH", "LD_PRELOAD"});
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.signal, 0) << r.output;
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_NE(r.output.find("error=could not load railyard"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("libnccl-net-railyard.so"), std::string::npos) << r.output;
}

// Proves a RAILYARD_CLUSTER_KEY_FILE that does not load stops init (outside fabric mode
// too) with ClusterKey::Load's message, as railyard-info and railyardd refuse it.
TEST(ConformanceLoading, AMissingClusterKeyFileStopsInit) {
  ExecResult r = Load({"path", PluginPath()}, {{"RAILYARD_CLUSTER_KEY_FILE", "/nonexistent/railyard.key"}},
                      {"LD_LIBRARY_PATH", "LD_PRELOAD"});
  ASSERT_FALSE(r.timedOut);
  EXPECT_EQ(r.signal, 0) << r.output;
  EXPECT_EQ(r.exitCode, 1) << r.output;
  EXPECT_EQ(r.output.find("init=0\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("cluster key /nonexistent/railyard.key (RAILYARD_CLUSTER_KEY_FILE): cannot open: "
                          "No such file or directory"),
            std::string::npos)
      << r.output;
}

// An interface list that matches nothing stops init naming the variable that held it
// (new-user trial: the error said "RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME").
TEST(ConformanceLoading, AnUnmatchedInterfaceListNamesItsVariable) {
  for (const std::string var : {"NCCL_SOCKET_IFNAME", "RAILYARD_SOCKET_IFNAME"}) {
    const std::string other = var == "NCCL_SOCKET_IFNAME" ? "RAILYARD_SOCKET_IFNAME" : "NCCL_SOCKET_IFNAME";
    ExecResult r = Load({"path", PluginPath()}, {{var, "=nosuchif0"}, {"RAILYARD_FABRIC", "off"}},
                        {"LD_LIBRARY_PATH", "LD_PRELOAD", other});
    ASSERT_FALSE(r.timedOut);
    EXPECT_EQ(r.signal, 0) << r.output;
    EXPECT_EQ(r.output.find("init=0\n"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(var + "='=nosuchif0' is set: socket interface list "
                                               "'=nosuchif0'"),
              std::string::npos)
        << var << ": " << r.output;
  }
}

// Proves NCCL_NET_PLUGIN=/abs/path/libnccl-net-railyard.so works: dlopen of the
// path with RTLD_NOW|RTLD_LOCAL resolves every symbol the library needs.
TEST(ConformanceLoading, ByPath) {
  ExpectWorkingPlugin(Load({"path", PluginPath()}, {}, {"LD_LIBRARY_PATH", "LD_PRELOAD"}));
}

// Proves the library works when LD_PRELOAD'ed: ncclNetPlugin_v11 is found with
// dlsym(RTLD_DEFAULT) in a process that never dlopens it (NCCL_NET_PLUGIN
// STATIC_PLUGIN style lookup in the global scope).
TEST(ConformanceLoading, ThroughLdPreload) {
  ExpectWorkingPlugin(Load({"preload"}, {{"LD_PRELOAD", SanitizerRuntime() + PluginPath()}}, {"LD_LIBRARY_PATH"}));
}

// Proves each exported table has the shape NCCL 2.28.9 relies on: name
// "Railyard"; every mandatory slot set; getDeviceMr and irecvConsumed NULL for a
// host plugin (§2.5: a non-NULL irecvConsumed is called with stale requests);
// v11 has finalize; and devices() and getProperties(0) agree across versions.
TEST(ConformanceLoading, ExportedTablesHaveTheExpectedShape) {
  RunRanks({.nranks = 1, .timeout = Ms(20000)}, [](Rank&) {
    Plugin p = OpenPlugin();
    ASSERT_NE(p.lib, nullptr);
    ASSERT_NE(p.v12, nullptr);
    ASSERT_NE(p.v11, nullptr);
    ASSERT_NE(p.v10, nullptr);
    ASSERT_NE(p.v9, nullptr);
    ASSERT_NE(p.v8, nullptr);
#define RY_EXPECT_SLOTS(t)                                                                    \
  do {                                                                                        \
    EXPECT_STREQ((t)->name, "Railyard");                                                      \
    EXPECT_TRUE((t)->init && (t)->devices && (t)->getProperties && (t)->listen &&             \
                (t)->connect && (t)->accept && (t)->regMr && (t)->deregMr && (t)->isend &&    \
                (t)->irecv && (t)->iflush && (t)->test && (t)->closeSend && (t)->closeRecv && \
                (t)->closeListen)                                                             \
        << #t " has a NULL mandatory slot";                                                   \
    EXPECT_EQ((t)->getDeviceMr, nullptr) << #t;                                               \
    EXPECT_EQ((t)->irecvConsumed, nullptr) << #t;                                             \
  } while (0)
    RY_EXPECT_SLOTS(p.v12);
    RY_EXPECT_SLOTS(p.v11);
    RY_EXPECT_SLOTS(p.v10);
    RY_EXPECT_SLOTS(p.v9);
    RY_EXPECT_SLOTS(p.v8);
#undef RY_EXPECT_SLOTS
    EXPECT_NE(p.v11->finalize, nullptr);
    EXPECT_NE(p.v11->setNetAttr, nullptr);
    EXPECT_NE(p.v12->finalize, nullptr);
    EXPECT_NE(p.v12->setNetAttr, nullptr);
    EXPECT_NE(p.v12->makeVDevice, nullptr);

    std::vector<int> ndev;
    for (int v : {11, 12, 10, 9, 8}) {
      Net net(p, v);
      ASSERT_EQ(net.Init(), ncclSuccess) << "v" << v << "\n" << CapturedWarnings();
      int n = -1;
      ASSERT_EQ(net.Devices(&n), ncclSuccess) << "v" << v;
      ndev.push_back(n);
    }
    EXPECT_GE(ndev[0], 1);
    for (int n : ndev) EXPECT_EQ(n, ndev[0]) << "devices() differs between table versions";
    ncclNetProperties_v11_t p11;
    ncclNetProperties_v10_t p10;
    ncclNetProperties_v9_t p9;
    ncclNetProperties_v8_t p8;
    ncclNetProperties_v12_t p12;
    ASSERT_EQ(p.v12->getProperties(0, &p12), ncclSuccess);
    ASSERT_EQ(p.v11->getProperties(0, &p11), ncclSuccess);
    ASSERT_EQ(p.v10->getProperties(0, &p10), ncclSuccess);
    ASSERT_EQ(p.v9->getProperties(0, &p9), ncclSuccess);
    ASSERT_EQ(p.v8->getProperties(0, &p8), ncclSuccess);
    EXPECT_EQ(p11.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_TRUE(p11.ptrSupport & NCCL_PTR_HOST);
    EXPECT_GE(p11.maxRecvs, 1);
    EXPECT_LE(p11.maxRecvs, 8);
    EXPECT_GT(p11.maxP2pBytes, 0u);
    EXPECT_LE(p11.maxP2pBytes, NCCL_MAX_NET_SIZE_BYTES);
    EXPECT_EQ(p11.vProps.ndevs, 1);
    EXPECT_EQ(p11.vProps.devs[0], 0);
    // v8's layout is shifted by the missing forceFlush: its speed must still be the speed.
    for (int speed : {p10.speed, p9.speed, p8.speed}) EXPECT_EQ(speed, p11.speed);
    for (int maxRecvs : {p10.maxRecvs, p9.maxRecvs, p8.maxRecvs}) EXPECT_EQ(maxRecvs, p11.maxRecvs);
    for (uint64_t guid : {p10.guid, p9.guid, p8.guid}) EXPECT_EQ(guid, p11.guid);
    EXPECT_EQ(p8.netDeviceType, NCCL_NET_DEVICE_HOST);
    // v12 moves maxP2pBytes to 104 and adds railId/planeId (nccl-2.30-abi.md §2.2).
    EXPECT_EQ(p12.netDeviceType, NCCL_NET_DEVICE_HOST);
    EXPECT_EQ(p12.speed, p11.speed);
    EXPECT_EQ(p12.guid, p11.guid);
    EXPECT_EQ(p12.maxRecvs, p11.maxRecvs);
    EXPECT_EQ(p12.maxP2pBytes, p11.maxP2pBytes);
    EXPECT_EQ(p12.maxCollBytes, p11.maxCollBytes);
    EXPECT_EQ(p12.vProps.ndevs, 1);
    EXPECT_EQ(p12.vProps.devs[0], 0);
    EXPECT_EQ(p12.railId, NCCL_NET_ID_UNDEF);
    EXPECT_EQ(p12.planeId, NCCL_NET_ID_UNDEF);
    EXPECT_STREQ(p12.name, p11.name);
    // v12 makeVDevice takes up to 8 members; Railyard's vNICs hold at most 4.
    ncclNetVDeviceProps_v12_t vp{};
    vp.ndevs = 5;
    int vd = -1;
    EXPECT_EQ(p.v12->makeVDevice(&vd, &vp), ncclInvalidArgument);
    EXPECT_EQ(p.v12->finalize(nullptr), ncclSuccess) << "v12 finalize(NULL)";
    EXPECT_EQ(p9.maxP2pBytes, p11.maxP2pBytes);
    EXPECT_STREQ(p8.name, p11.name);
    EXPECT_EQ(p.v11->finalize(nullptr), ncclSuccess) << "finalize(NULL) after a failed init";
  });
}

// ---- every byte of every properties struct written ----

/// [offset, offset+size) of one struct field.
struct Field {
  size_t offset;
  size_t size;
  const char* name;
};
#define RY_FIELD(T, f) Field{offsetof(T, f), sizeof(T::f), #f}

/// The fields of each properties version, from the ABI headers. Bytes of the
/// struct outside all fields are padding and may stay unwritten.
template <typename T>
std::vector<Field> FieldsOf();

#define RY_COMMON_FIELDS(T)                                                                 \
  RY_FIELD(T, name), RY_FIELD(T, pciPath), RY_FIELD(T, guid), RY_FIELD(T, ptrSupport),      \
      RY_FIELD(T, regIsGlobal), RY_FIELD(T, speed), RY_FIELD(T, port), RY_FIELD(T, latency), \
      RY_FIELD(T, maxComms), RY_FIELD(T, maxRecvs), RY_FIELD(T, netDeviceType),             \
      RY_FIELD(T, netDeviceVersion)
#define RY_V9_FIELDS(T)                                                        \
  RY_COMMON_FIELDS(T), RY_FIELD(T, forceFlush), RY_FIELD(T, vProps.ndevs),     \
      RY_FIELD(T, vProps.devs), RY_FIELD(T, maxP2pBytes), RY_FIELD(T, maxCollBytes)

template <>
std::vector<Field> FieldsOf<ncclNetProperties_v12_t>() {
  using T = ncclNetProperties_v12_t;
  return {RY_V9_FIELDS(T), RY_FIELD(T, maxMultiRequestSize), RY_FIELD(T, railId), RY_FIELD(T, planeId)};
}
template <>
std::vector<Field> FieldsOf<ncclNetProperties_v11_t>() {
  return {RY_V9_FIELDS(ncclNetProperties_v11_t), RY_FIELD(ncclNetProperties_v11_t, maxMultiRequestSize)};
}
template <>
std::vector<Field> FieldsOf<ncclNetProperties_v10_t>() {
  return {RY_V9_FIELDS(ncclNetProperties_v10_t)};
}
template <>
std::vector<Field> FieldsOf<ncclNetProperties_v9_t>() {
  return {RY_V9_FIELDS(ncclNetProperties_v9_t)};
}
template <>
std::vector<Field> FieldsOf<ncclNetProperties_v8_t>() {
  return {RY_COMMON_FIELDS(ncclNetProperties_v8_t)};
}

/// Calls getProperties(dev) on a struct pre-filled with 0xA5 and again with 0x5A;
/// a field byte holding the fill pattern in both runs was never written.
template <typename T, typename Fn>
void ExpectEveryFieldWritten(int version, int dev, Fn getProperties) {
  const std::vector<Field> fields = FieldsOf<T>();
  std::vector<bool> inField(sizeof(T), false);
  for (const Field& f : fields) {
    ASSERT_LE(f.offset + f.size, sizeof(T)) << f.name;
    for (size_t b = f.offset; b < f.offset + f.size; ++b) inField[b] = true;
  }
  unsigned char runs[2][sizeof(T)];
  const unsigned char fill[2] = {0xA5, 0x5A};
  for (int k = 0; k < 2; ++k) {
    T props;
    std::memset(&props, fill[k], sizeof props);
    ASSERT_EQ(getProperties(dev, &props), ncclSuccess) << "v" << version << " dev " << dev;
    std::memcpy(runs[k], &props, sizeof props);
  }
  for (const Field& f : fields) {
    std::vector<size_t> unwritten;
    for (size_t b = f.offset; b < f.offset + f.size; ++b) {
      if (runs[0][b] == fill[0] && runs[1][b] == fill[1]) unwritten.push_back(b - f.offset);
    }
    EXPECT_TRUE(unwritten.empty()) << "v" << version << " getProperties(" << dev
                                   << ") left " << unwritten.size() << " of " << f.size
                                   << " bytes of field '" << f.name << "' (offset " << f.offset
                                   << ") unwritten";
  }
  size_t padding = 0;
  for (bool b : inField) padding += b ? 0 : 1;
  // The holes the ABI has: v12 4 B after vProps, v11 4 B at the end, v10/v9 4 B after
  // vProps, v8 4 B at the end.
  EXPECT_LE(padding, 8u) << "v" << version << ": the field list misses a field";
}

// Proves getProperties writes every field of every version's struct (NCCL hands
// an uninitialised struct, §2.3): for v12 (railId/planeId included), v11, v10, v9
// and v8, the GIN v11 table and the RMA v14/v13 tables, and every device, the
// struct is pre-filled with 0xA5 and then 0x5A, and no field byte may keep the
// fill in both runs. Padding holes are computed from offsetof/sizeof and skipped.
TEST(ConformanceLoading, GetPropertiesWritesEveryFieldOfEveryVersion) {
  RunRanks({.nranks = 1, .timeout = Ms(20000)}, [](Rank&) {
    Plugin p = OpenPlugin();
    ASSERT_NE(p.lib, nullptr);
    for (int v : {12, 11, 10, 9, 8}) {
      Net net(p, v);
      ASSERT_EQ(net.Init(), ncclSuccess) << "v" << v;
    }
    int ndev = 0;
    ASSERT_EQ(p.v11->devices(&ndev), ncclSuccess);
    ASSERT_GE(ndev, 1);
    for (int dev = 0; dev < ndev; ++dev) {
      ExpectEveryFieldWritten<ncclNetProperties_v12_t>(12, dev, p.v12->getProperties);
      ExpectEveryFieldWritten<ncclNetProperties_v11_t>(11, dev, p.v11->getProperties);
      ExpectEveryFieldWritten<ncclNetProperties_v10_t>(10, dev, p.v10->getProperties);
      ExpectEveryFieldWritten<ncclNetProperties_v9_t>(9, dev, p.v9->getProperties);
      ExpectEveryFieldWritten<ncclNetProperties_v8_t>(8, dev, p.v8->getProperties);
    }
    // The one-sided tables report the same devices in the GIN_PROXY type.
    const auto* gin = static_cast<const ncclGin_v11_t*>(::dlsym(p.lib, "ncclGinPlugin_v11"));
    const auto* rma14 = static_cast<const ncclRma_v14_t*>(::dlsym(p.lib, "ncclRmaPlugin_v14"));
    const auto* rma13 = static_cast<const ncclRma_v13_t*>(::dlsym(p.lib, "ncclRmaPlugin_v13"));
    ASSERT_TRUE(gin != nullptr && rma14 != nullptr && rma13 != nullptr);
    void* ginCtx = nullptr;
    ASSERT_EQ(gin->init(&ginCtx, 7, &CapturingLogger), ncclSuccess) << CapturedWarnings();
    for (int dev = 0; dev < ndev; ++dev) {
      ExpectEveryFieldWritten<ncclNetProperties_v11_t>(11, dev, gin->getProperties);
      ExpectEveryFieldWritten<ncclNetProperties_v12_t>(14, dev, rma14->getProperties);
      ExpectEveryFieldWritten<ncclNetProperties_v12_t>(13, dev, rma13->getProperties);
      ncclNetProperties_v12_t r;
      ASSERT_EQ(rma14->getProperties(dev, &r), ncclSuccess);
      EXPECT_EQ(r.netDeviceType, NCCL_NET_DEVICE_GIN_PROXY) << "RMA must report GIN_PROXY (2.30 sheet §7.2)";
      EXPECT_EQ(r.maxRecvs & (r.maxRecvs - 1), 0) << "maxRecvs must be a power of two (2.30 sheet §7.9)";
    }
    // Several init/finalize pairs per comm (GIN v11 inits again at connect; RMA inits twice).
    void* second = nullptr;
    void* rmaCtx = nullptr;
    ASSERT_EQ(gin->init(&second, 7, &CapturingLogger), ncclSuccess);
    ASSERT_EQ(rma14->init(&rmaCtx, 7, &CapturingLogger), ncclSuccess);
    EXPECT_NE(second, ginCtx);
    EXPECT_EQ(gin->finalize(second), ncclSuccess);
    EXPECT_EQ(rma14->finalize(rmaCtx), ncclSuccess);
    int again = 0;
    EXPECT_EQ(gin->devices(&again), ncclSuccess) << "the first ctx must still work";
    EXPECT_EQ(again, ndev);
    EXPECT_EQ(gin->finalize(ginCtx), ncclSuccess);
  });
}

}  // namespace
}  // namespace railyard::conformance
