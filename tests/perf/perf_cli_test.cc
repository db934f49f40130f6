// railyard-perf as a program (issue 8.6): every table version NCCL 2.28.9 loads runs end to
// end through the fake plugin, a test() that leaves sizes unwritten is a WARN, an unwritable
// --json fails before the run, ranks with different options say so, and --help documents
// the exit statuses; in multi-host mode a rank that stops because another failed exits 4.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/common/free_port.h"

namespace {

const std::string kPerf = RAILYARD_PERF_BIN;
const std::string kRailyard = RAILYARD_PLUGIN_LIB;  ///< the real plugin: the fake one is in-process only
const std::string kDir = RAILYARD_FAKE_PLUGIN_DIR;
std::string Lib(const std::string& ver) { return kDir + "/libnccl-net-fake" + ver + ".so"; }

struct Result {
  int status = -1;  ///< exit status, or -1 when killed by a signal
  std::string out, err;
};

std::string Slurp(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

/// Runs `cmd` with /bin/sh, stdout and stderr captured separately.
Result RunShell(const std::string& cmd) {
  const std::string base = ::testing::TempDir() + "perf_cli_" + std::to_string(getpid());
  const int st = std::system((cmd + " >" + base + ".out 2>" + base + ".err").c_str());
  Result r;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  r.out = Slurp(base + ".out");
  r.err = Slurp(base + ".err");
  std::remove((base + ".out").c_str());
  std::remove((base + ".err").c_str());
  return r;
}

std::size_t Count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

const std::string kSmallRun = " -np 1 -p ring -b 1K -e 256K -f 4 -n 3 -w 1 -c 1 -T 60";

TEST(PerfCli, EveryTableVersionNccl2289LoadsRunsEndToEnd) {
  for (const char* ver : {"11", "8", "7", "6"}) {
    SCOPED_TRACE(ver);
    const Result r = RunShell(kPerf + " --plugin " + Lib(ver) + kSmallRun);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find(std::string("ncclNetPlugin_v") + ver), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out << r.err;
    EXPECT_EQ(Count(r.out, "    float   none "), 5u) << r.out;  // rows 1K, 4K, 16K, 64K, 256K
  }
}

// -np sets RAILYARD_SOCKET_IFNAME='=lo' for its ranks when the user set neither variable; a
// failure naming that value used to read as the user's own setting (new-user trial).
TEST(PerfCli, AFailureSaysWhichSettingRailyardPerfInjected) {
  const Result r = RunShell("env -u RAILYARD_SOCKET_IFNAME -u NCCL_SOCKET_IFNAME RAILYARD_FABRIC=on " + kPerf +
                            " --plugin " + kRailyard + " -np 2 -b 4K -e 4K -n 1 -w 0 -T 60");
  EXPECT_NE(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("RAILYARD_FABRIC=on but no interface qualifies as a rail"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("\nrailyard-perf: note: RAILYARD_SOCKET_IFNAME='=lo' (exactly the loopback interface lo) "
                       "was set by railyard-perf -np for its local ranks, not taken from your environment; set "
                       "RAILYARD_SOCKET_IFNAME yourself to choose the interfaces\n"),
            std::string::npos)
      << r.err;
  // A failure that is not about the interfaces gets no such note (it came with every one).
  const Result other = RunShell("env -u RAILYARD_SOCKET_IFNAME -u NCCL_SOCKET_IFNAME RAILYARD_NSOCKS=0 " + kPerf +
                                " --plugin " + kRailyard + " -np 2 -b 4K -e 4K -n 1 -w 0 -T 60");
  EXPECT_EQ(other.status, 1) << other.out << other.err;
  EXPECT_NE(other.err.find("RAILYARD_NSOCKS='0' is not valid"), std::string::npos) << other.err;
  EXPECT_EQ(other.err.find("railyard-perf: note:"), std::string::npos) << other.err;
}

// A plugin whose init refuses a setting is a failed call (exit 1) with the plugin's
// reason, for every family of patterns alike; the loader's step log only with
// NCCL_DEBUG=INFO (new-user trial: the collectives exited 2, "bad flags", and printed
// "Could not find: railyard"; the gin-* patterns said "init failed on rank 0: 5").
TEST(PerfCli, APluginThatRefusesItsSettingsIsAFailedCallInEveryPattern) {
  for (const char* pattern : {"sendrecv", "allreduce", "gin-put"}) {
    SCOPED_TRACE(pattern);
    const Result r = RunShell("env -u NCCL_DEBUG RAILYARD_SOCKET_IFNAME==lo RAILYARD_NSOCKS=0 " + kPerf + " --plugin " +
                              kRailyard + " -np 2 -p " + pattern + " -b 1K -e 1K -n 1 -w 0 -T 60");
    EXPECT_EQ(r.status, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("ncclInvalidUsage (5)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("RAILYARD_NSOCKS='0' is not valid"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("Could not find"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("[?]"), std::string::npos) << r.err;
  }
  // -d/-o on a pattern that ignores them: run, with a warning.
  const Result w = RunShell("env RAILYARD_SOCKET_IFNAME==lo " + kPerf + " --plugin " + kRailyard +
                            " -np 2 -p sendrecv -o max -b 1K -e 1K -n 1 -w 0 -T 60");
  EXPECT_EQ(w.status, 0) << w.out << w.err;
  EXPECT_NE(w.err.find("warning: -d and -o apply to allreduce, allgather and reducescatter"), std::string::npos)
      << w.err;
  // -z on a pattern that ignores it, -o on allgather: run, with a warning each
  // (new-user trial: both were accepted silently).
  const Result z = RunShell("env RAILYARD_SOCKET_IFNAME==lo " + kPerf + " --plugin " + kRailyard +
                            " -np 2 -p sendrecv -z 1 -b 1K -e 1K -n 1 -w 0 -T 60");
  EXPECT_EQ(z.status, 0) << z.out << z.err;
  EXPECT_NE(z.err.find("warning: -z applies to allreduce, allgather and reducescatter; -p sendrecv ignores it"),
            std::string::npos)
      << z.err;
  const Result g = RunShell("env RAILYARD_SOCKET_IFNAME==lo " + kPerf + " --plugin " + kRailyard +
                            " -np 2 -p allgather -o prod -b 1K -e 1K -n 1 -w 0 -T 60");
  EXPECT_EQ(g.status, 0) << g.out << g.err;
  EXPECT_NE(g.err.find("warning: -p allgather reduces nothing and ignores -o prod"), std::string::npos) << g.err;
  EXPECT_EQ(w.err.find("-z applies"), std::string::npos) << w.err;  // not said where no -z was given
  const Result t = RunShell("env RAILYARD_SOCKET_IFNAME==lo " + kPerf + " --plugin " + kRailyard +
                            " -np 2 -p ring --one-sided gin-v11 -b 1K -e 1K -n 1 -w 0 -T 60");
  EXPECT_EQ(t.status, 0) << t.out << t.err;
  EXPECT_NE(t.err.find("warning: --one-sided applies to the gin-* patterns; -p ring ignores it"), std::string::npos)
      << t.err;
  EXPECT_NE(g.out.find("datatype float, op none"), std::string::npos) << g.out;  // allgather's header: no -o
}

// An empty --plugin is read as unset, as NCCL reads an empty NCCL_NET_PLUGIN, and it
// overrides the variable; the fallback's log line says so (new-user trial: it said
// "NCCL_NET_PLUGIN is unset" while NCCL_NET_PLUGIN=nosuch was set).
TEST(PerfCli, AnEmptyPluginFlagIsReadAsUnsetAndTheLogSaysWhichValue) {
  const Result r = RunShell("NCCL_NET_PLUGIN=nosuch NCCL_DEBUG=INFO RAILYARD_SOCKET_IFNAME==lo " + kPerf +
                            " --plugin '' -np 1 -p ring -b 1K -e 1K -n 1 -w 0 -T 60");
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  const std::string all = r.out + r.err;
  EXPECT_NE(all.find("NET/Plugin: --plugin='' names no plugin (read as unset, as NCCL does) and libnccl-net.so did "
                     "not load"),
            std::string::npos)
      << all;
  EXPECT_EQ(all.find("NCCL_NET_PLUGIN is unset"), std::string::npos) << all;
}

// NCCL_DEBUG_SUBSYS filters the plugin's INFO lines as NCCL's does (new-user trial: it
// was ignored): ^NET drops the NET-only lines, a list naming nothing known drops all, and
// unset shows every subsystem. Counted in one run each, against the unset run. railyard-perf's
// own step lines follow it too (its loader's log is INIT and NET, as NCCL's plugin loading).
TEST(PerfCli, DebugSubsysFiltersThePluginsInfoLinesAsNcclDoes) {
  auto run = [](const std::string& subsys) {
    const Result r = RunShell("NCCL_DEBUG=INFO " + (subsys.empty() ? std::string("env -u NCCL_DEBUG_SUBSYS")
                                                                    : "NCCL_DEBUG_SUBSYS='" + subsys + "'") +
                              " RAILYARD_SOCKET_IFNAME==lo " + kPerf + " --plugin " + kRailyard +
                              " -np 2 -p sendrecv -b 1K -e 1K -n 1 -w 0 -T 60");
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    return r;
  };
  const Result all = run("");
  const Result notNet = run("^NET");
  const Result none = run("NOSUCH");
  const Result init = run("INIT");
  EXPECT_GT(Count(all.err, "NCCL INFO"), 0u);
  EXPECT_LT(Count(notNet.err, "NCCL INFO"), Count(all.err, "NCCL INFO")) << "^NET showed every line";
  EXPECT_EQ(Count(none.err, "NCCL INFO"), 0u);
  EXPECT_EQ(Count(all.err, "NET/Plugin: loaded"), 2u) << all.err;  // one per rank
  EXPECT_EQ(Count(init.err, "NET/Plugin: loaded"), 2u) << init.err;
  EXPECT_EQ(Count(none.err, "NET/Plugin: loaded"), 0u) << none.err;
}

TEST(PerfCli, TestLeavingSizesUnwrittenIsOneWarnNotAnAbort) {
  const Result r = RunShell("FAKE_NET_NO_SIZES=1 " + kPerf + " --plugin " + Lib("7") + kSmallRun);
  EXPECT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out << r.err;
  EXPECT_EQ(Count(r.err, "WARN the plugin's test() completed an irecv from peer 0 without writing sizes[0]"), 1u)
      << r.err;
}

TEST(PerfCli, UnwritableJsonFailsBeforeTheRun) {
  const Result r = RunShell(kPerf + " --plugin " + Lib("11") + kSmallRun + " --json /nonexistent-dir/rows.json");
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("--json /nonexistent-dir/rows.json: cannot be written: No such file or directory"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("Out of bounds"), std::string::npos) << "the run happened anyway:\n" << r.out;
  // A writable path works and is written after the run.
  const std::string json = ::testing::TempDir() + "perf_cli_rows_" + std::to_string(getpid()) + ".json";
  const Result ok = RunShell(kPerf + " --plugin " + Lib("11") + kSmallRun + " --json " + json);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(Slurp(json).find("\"rows\""), std::string::npos);
  std::remove(json.c_str());
}

// --json is written for the collective and one-sided patterns too, naming the table that
// ran (new-user trial: with -p allreduce or gin-put the file was never written).
TEST(PerfCli, JsonIsWrittenForTheCollectiveAndOneSidedPatterns) {
  struct Case {
    const char* pattern;
    const char* symbol;
  };
  for (const Case c : {Case{"allreduce", "\"symbol\": \"ncclCollNetPlugin_v12\""},
                       Case{"gin-put", "\"symbol\": \"ncclRmaPlugin_v14\""}}) {
    SCOPED_TRACE(c.pattern);
    const std::string json = ::testing::TempDir() + "perf_cli_" + c.pattern + "_" + std::to_string(getpid()) + ".json";
    const Result r = RunShell("env RAILYARD_SOCKET_IFNAME==lo " + kPerf + " --plugin " + kRailyard + " -np 2 -p " +
                              c.pattern + " -b 1K -e 4K -f 4 -n 2 -w 1 -c 1 -T 60 --json " + json);
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    const std::string text = Slurp(json);
    EXPECT_NE(text.find(std::string("\"pattern\": \"") + c.pattern + "\""), std::string::npos) << text;
    EXPECT_NE(text.find(c.symbol), std::string::npos) << text;
    EXPECT_EQ(Count(text, "\"busbw_gbps\""), 2u) << text;  // one per size: 1K and 4K
    EXPECT_NE(text.find("\"out_of_bounds\": 0"), std::string::npos) << text;
    EXPECT_NE(text.find("\"name\": \"lo\""), std::string::npos) << text;  // the device, as the table reports it
    std::remove(json.c_str());
  }
}

TEST(PerfCli, RanksStartedWithDifferentOptionsSaySo) {
  const int port = railyard::test_support::FreePort();
  ASSERT_GT(port, 0);
  const std::string base = ::testing::TempDir() + "perf_cli_ranks_" + std::to_string(getpid());
  const std::string common = " --plugin " + Lib("11") + " --nranks 2 --root 127.0.0.1:" + std::to_string(port) +
                             " -p sendrecv -e 1M -n 3 -T 30";
  const Result r = RunShell("(" + kPerf + " --rank 0 -b 4K" + common + " >" + base + ".o0 2>" + base + ".e0 & p=$!; " +
                       kPerf + " --rank 1 -b 1K" + common + " >" + base + ".o1 2>" + base + ".e1; r1=$?; wait $p; " +
                       "echo $? $r1)");
  EXPECT_EQ(r.out, "2 2\n") << Slurp(base + ".e0") << Slurp(base + ".e1");
  const std::string e0 = Slurp(base + ".e0");
  EXPECT_NE(e0.find("the ranks' options differ: -b 1K on rank 1 but 4K on rank 0"), std::string::npos) << e0;
  // Rank 1 says it too (it exited 2 with nothing but the bootstrap's "waiting for rank 0").
  const std::string e1 = Slurp(base + ".e1");
  EXPECT_NE(e1.find("railyard-perf: rank 1: the ranks' options differ: -b 1K on rank 1 but 4K on rank 0"),
            std::string::npos)
      << e1;
  EXPECT_EQ(Slurp(base + ".o0").find("Out of bounds"), std::string::npos);
  for (const char* ext : {".o0", ".e0", ".o1", ".e1"}) std::remove((base + ext).c_str());
  // The collectives' -d and -o by value too (new-user trial: "-d/-o differ from rank 1").
  const int port2 = railyard::test_support::FreePort();
  ASSERT_GT(port2, 0);
  const std::string coll = " --nranks 2 --root 127.0.0.1:" + std::to_string(port2) + " -p allreduce -b 1K -e 1K -T 30";
  const Result d = RunShell("(RAILYARD_SOCKET_IFNAME==lo " + kPerf + " --plugin " + kRailyard + " --rank 0 -d int8" +
                            coll + " >/dev/null 2>" + base + ".e0 & p=$!; RAILYARD_SOCKET_IFNAME==lo " + kPerf +
                            " --plugin " + kRailyard + " --rank 1 -o max" + coll + " >/dev/null 2>" + base +
                            ".e1; r1=$?; wait $p; echo $? $r1)");
  EXPECT_EQ(d.out, "2 2\n") << Slurp(base + ".e0") << Slurp(base + ".e1");
  const std::string d0 = Slurp(base + ".e0");
  EXPECT_NE(d0.find("the ranks' options differ: -d float on rank 1 but int8 on rank 0, -o max on rank 1 but sum on "
                    "rank 0"),
            std::string::npos)
      << d0;
  for (const char* ext : {".e0", ".e1"}) std::remove((base + ext).c_str());
  // Different --nranks: both exit 2, and the joining rank hears why (new-user trial: it
  // failed later on a closed socket, "Broken pipe", exit 4).
  const int port3 = railyard::test_support::FreePort();
  ASSERT_GT(port3, 0);
  const std::string root = " --root 127.0.0.1:" + std::to_string(port3) + " -p ring -b 1K -e 1K -T 30";
  const Result n = RunShell("(" + kPerf + " --plugin " + Lib("11") + " --rank 0 --nranks 2" + root + " >/dev/null 2>" +
                            base + ".e0 & p=$!; " + kPerf + " --plugin " + Lib("11") + " --rank 1 --nranks 3" + root +
                            " >/dev/null 2>" + base + ".e1; r1=$?; wait $p; echo $? $r1)");
  EXPECT_EQ(n.out, "2 2\n") << Slurp(base + ".e0") << Slurp(base + ".e1");
  const std::string n1 = Slurp(base + ".e1");
  EXPECT_NE(n1.find("refused this process as rank 1 of 3: it runs --nranks 2"), std::string::npos) << n1;
  for (const char* ext : {".e0", ".e1"}) std::remove((base + ext).c_str());
}

TEST(PerfCli, HelpDocumentsEveryExitStatus) {
  const Result r = RunShell(kPerf + " --help");
  EXPECT_EQ(r.status, 0);
  for (const char* line : {"Exit status:", "  0  every size ran", "  1  error:", "  2  bad flags",
                           "  3  the run finished but #wrong > 0",
                           "  4  this rank stopped because another rank failed first"}) {
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  }
  EXPECT_EQ(RunShell(kPerf + " --no-such-flag").status, 2);
}

}  // namespace

// Multi-host mode, 4 ranks sendrecv (pairs 0-1, 2-3) on the real plugin over loopback: rank 0
// alone has -T 2 (-T is not among the options the ranks compare) and fails on its deadline
// (exit 1). Ranks 2 and 3 never talk to rank 0 over the plugin: they stop only because rank
// 0's bootstrap connection went away, which is exit 4 ("this rank stopped only because
// another rank failed first"). They exited 1, like rank 0, when that happened in a
// barrier ("bootstrap: recv while barrier #N (waiting for rank 0): Connection reset").
TEST(PerfCli, RanksStoppedByAnotherRanksFailureExit4) {
  const int port = railyard::test_support::FreePort();
  ASSERT_GT(port, 0);
  const std::string base = ::testing::TempDir() + "perf_cli_peer_" + std::to_string(getpid());
  const std::string common = " --plugin " + kRailyard + " --nranks 4 --root 127.0.0.1:" + std::to_string(port) +
                             " -p sendrecv -b 1M -e 1M -n 1000000 -w 0 -c 1";
  std::string cmd = "(RAILYARD_SOCKET_IFNAME==lo; export RAILYARD_SOCKET_IFNAME; ";
  for (int r = 0; r < 4; ++r) {
    cmd += kPerf + " --rank " + std::to_string(r) + common + (r == 0 ? " -T 2" : " -T 50") + " >" + base + ".o" +
           std::to_string(r) + " 2>" + base + ".e" + std::to_string(r) + " & p" + std::to_string(r) + "=$!; ";
  }
  cmd += "wait $p0; s0=$?; wait $p1; s1=$?; wait $p2; s2=$?; wait $p3; s3=$?; echo $s0 $s2 $s3)";
  const Result r = RunShell(cmd);
  std::string logs;
  for (int k = 0; k < 4; ++k) logs += "rank " + std::to_string(k) + ": " + Slurp(base + ".e" + std::to_string(k));
  EXPECT_EQ(r.out, "1 4 4\n") << logs;
  for (int k = 0; k < 4; ++k) {
    std::remove((base + ".o" + std::to_string(k)).c_str());
    std::remove((base + ".e" + std::to_string(k)).c_str());
  }
}

// A rank started without its rank 0 says at once what it waits for (it was silent until -T:
// 10 minutes by default), then times out naming rank 0's address (exit 1).
TEST(PerfCli, RankWithoutRank0SaysWhatItWaitsFor) {
  const int port = railyard::test_support::FreePort();
  ASSERT_GT(port, 0);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  const Result r = RunShell(kPerf + " --plugin " + Lib("11") + " --rank 1 --nranks 2 --root " + where + " -T 1");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(Count(r.err, "railyard-perf: rank 1: waiting for rank 0 at " + where + " (Connection refused)"), 1u)
      << r.err;
  EXPECT_NE(r.err.find("timed out connecting to rank 0 at " + where), std::string::npos) << r.err;
}

// Rank 0 started without the others says once what it waits for (it was silent until -T,
// 10 minutes by default; new-user trial), then times out naming the ranks missing.
TEST(PerfCli, Rank0WithoutTheOthersSaysWhatItWaitsFor) {
  const int port = railyard::test_support::FreePort();
  ASSERT_GT(port, 0);
  const std::string where = "127.0.0.1:" + std::to_string(port);
  const Result r = RunShell(kPerf + " --plugin " + Lib("11") + " --rank 0 --nranks 3 --root " + where + " -T 1");
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(Count(r.err, "railyard-perf: rank 0: waiting for 2 rank(s) to join at " + where + "; until the -T limit (1 s)"),
            1u)
      << r.err;
  EXPECT_NE(r.err.find("waiting for ranks to join (0 of 2 joined)"), std::string::npos) << r.err;
}
