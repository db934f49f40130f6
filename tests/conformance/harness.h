// Conformance harness: runs N rank processes that each load the plugin with
// dlopen(RTLD_NOW|RTLD_LOCAL), as NCCL does (nccl-net-abi.md §1.2-§1.3), and drive
// its exported tables. Coordination goes through socketpairs created before
// fork; every wait is a bounded poll(); the parent kills every rank when a run
// overruns and fails the test naming the ranks that hung.
//
// Transport-specific settings live in one place: TransportSettings() in
// harness.cc, selected by RAILYARD_CONFORMANCE_TRANSPORT (default "tcp"), so the
// same tests run unchanged over the verbs transport.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v12.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"

namespace railyard::conformance {

using Clock = std::chrono::steady_clock;
using Ms = std::chrono::milliseconds;
using EnvList = std::vector<std::pair<std::string, std::string>>;

// ---------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------

/// Name of the transport under test: RAILYARD_CONFORMANCE_TRANSPORT, default "tcp".
std::string TransportName();
/// Environment every process that loads the plugin gets for the current transport,
/// plus RAILYARD_TIMEOUT_MS = `timeoutMs`. For tcp: RAILYARD_SOCKET_IFNAME "=lo"
/// (loopback only). An unknown transport name yields an empty list and
/// TransportError() says why.
EnvList PluginEnv(int timeoutMs);
/// Empty when the transport is known; otherwise the reason tests cannot run.
std::string TransportError();
/// The plugin library under test: RAILYARD_CONFORMANCE_PLUGIN, else the path of
/// the build's nccl-net-railyard target.
std::string PluginPath();
/// Directory part of PluginPath().
std::string PluginDir();

// ---------------------------------------------------------------------------
// Rank processes
// ---------------------------------------------------------------------------

struct RunOptions {
  int nranks = 2;
  /// Wall-clock bound of the whole run. The parent SIGKILLs every rank still
  /// running after it and fails the test naming them. Ranks see a deadline a
  /// little earlier (Rank::deadline()) so they can fail with their own message.
  Ms timeout{30000};
  /// RAILYARD_TIMEOUT_MS in every rank.
  int pluginTimeoutMs = 3000;
};

/// What a rank body sees: its identity and the channels to its peers and parent.
/// All waits are bounded by deadline(); on timeout or a closed channel the call
/// records a gtest failure naming the peer and returns false.
class Rank {
 public:
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  /// Process id of rank `r` (any rank, including this one).
  pid_t pid(int r) const { return pids_.at(static_cast<size_t>(r)); }
  /// When this rank's waits give up (before the parent's kill).
  Clock::time_point deadline() const { return deadline_; }
  /// RAILYARD_TIMEOUT_MS the plugin was given in this run.
  int pluginTimeoutMs() const { return pluginTimeoutMs_; }

  /// Writes `bytes` to peer `peer`'s channel.
  bool Send(int peer, const void* data, size_t bytes);
  /// Reads exactly `bytes` from peer `peer`'s channel.
  bool Recv(int peer, void* data, size_t bytes);
  bool SendU64(int peer, uint64_t v) { return Send(peer, &v, sizeof v); }
  bool RecvU64(int peer, uint64_t* v) { return Recv(peer, v, sizeof v); }
  /// Waits for a uint64 from `peer` and checks it equals `expected`.
  bool Expect(int peer, uint64_t expected);
  /// Every rank reaches this point before any leaves it.
  bool Barrier();
  /// Tells the parent where this rank is; quoted in the failure if the run hangs.
  void Note(const std::string& where);
  /// Asks the parent to SIGKILL rank `r`; returns once the parent has reaped it.
  bool Kill(int r);

 private:
  friend struct RankAccess;
  bool SendFd(int fd, const void* data, size_t bytes, const std::string& who);
  bool RecvFd(int fd, void* data, size_t bytes, const std::string& who);
  int rank_ = 0;
  int nranks_ = 0;
  int control_ = -1;         ///< SOCK_SEQPACKET to the parent
  std::vector<int> peers_;   ///< SOCK_STREAM to each peer (-1 for self)
  std::vector<pid_t> pids_;
  Clock::time_point deadline_{};
  int pluginTimeoutMs_ = 0;
};

/// Forks opts.nranks rank processes, runs body(rank) in each, and waits (bounded)
/// for every one to report. A rank's gtest failures (EXPECT_*/ASSERT_* inside the
/// body) come back as failures of the calling test, prefixed "rank r". A rank that
/// dies, hangs or was killed other than through Rank::Kill fails the test.
void RunRanks(const RunOptions& opts, const std::function<void(Rank&)>& body);
/// RunRanks without recording: returns one message per problem (empty = all
/// ranks passed). For the harness's own tests.
std::vector<std::string> RunRanksReport(const RunOptions& opts,
                                        const std::function<void(Rank&)>& body);

// ---------------------------------------------------------------------------
// The plugin, as NCCL sees it
// ---------------------------------------------------------------------------

/// The library opened with dlopen(RTLD_NOW|RTLD_LOCAL) and its exported tables
/// (NULL when a symbol is missing). Never dlclosed: plugin threads may outlive it.
struct Plugin {
  void* lib = nullptr;
  const ncclNet_v12_t* v12 = nullptr;
  const ncclNet_v11_t* v11 = nullptr;
  const ncclNet_v10_t* v10 = nullptr;
  const ncclNet_v9_t* v9 = nullptr;
  const ncclNet_v8_t* v8 = nullptr;
};
/// Opens `path` (default PluginPath()). Records a gtest failure and returns
/// lib == NULL when dlopen fails.
Plugin OpenPlugin(const std::string& path = PluginPath());

/// One captured call of the logger handed to init.
struct LogLine {
  ncclDebugLogLevel level;
  unsigned long flags;
  std::string text;
};
/// The logger every Net::Init installs: records each line (thread-safe) and, with
/// RAILYARD_CONFORMANCE_VERBOSE set, echoes it to stderr.
void CapturingLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                     const char* fmt, ...) __attribute__((format(printf, 5, 6)));
std::vector<LogLine> CapturedLog();
/// WARN lines captured so far, joined with newlines (for failure messages).
std::string CapturedWarnings();
/// Waits (on a condition variable, until `deadline`) for a captured WARN line for
/// which `match` is true; returns it, or empty. Plugin helper threads may log an
/// error just after the caller's test() has already returned it.
std::string WaitForWarning(const std::function<bool(const std::string&)>& match,
                           Clock::time_point deadline);
/// First captured WARN line containing every one of `needles`; empty if none.
std::string FindWarning(const std::vector<std::string>& needles);

/// Returned by the bounded loops below when the deadline passes first. The plugin
/// never returns ncclInProgress from a net call, so it cannot be confused.
inline constexpr ncclResult_t kTimedOut = ncclInProgress;

/// A v11-shaped view of one exported table (version 12, 11, 10, 9 or 8), so one test
/// body runs over every version and checks the adapters end to end. Sizes are
/// size_t here; the v8 view converts to and from int. v12 has v11's slots and
/// signatures except getProperties and makeVDevice (which Net never calls; the
/// loading tests call them on the v12 table directly), so Net drives the v12 table's
/// own function pointers through the v11 slot types.
class Net {
 public:
  Net(const Plugin& plugin, int version);
  int version() const { return version_; }
  /// The table's name field.
  const char* name() const;
  /// v12/v11: init(&ctx, commId, {trafficClass -1}, CapturingLogger, NULL);
  /// v10: init(CapturingLogger, NULL); v9/v8: init(CapturingLogger).
  ncclResult_t Init(uint64_t commId = 1);
  /// v12/v11: finalize(ctx); older versions have no finalize and return ncclSuccess.
  ncclResult_t Finalize();
  ncclResult_t Devices(int* ndev);
  ncclResult_t Listen(int dev, void* handle, void** listenComm);
  ncclResult_t Connect(int dev, void* handle, void** sendComm);
  ncclResult_t Accept(void* listenComm, void** recvComm);
  /// regMr with NCCL_PTR_HOST.
  ncclResult_t RegMr(void* comm, void* data, size_t size, void** mhandle);
  ncclResult_t DeregMr(void* comm, void* mhandle);
  ncclResult_t Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                     void** request);
  ncclResult_t Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                     void** mhandles, void** request);
  ncclResult_t Test(void* request, int* done, int* sizes);
  ncclResult_t CloseSend(void* sendComm);
  ncclResult_t CloseRecv(void* recvComm);
  ncclResult_t CloseListen(void* listenComm);

  // ---- bounded loops, as NCCL's proxy threads drive the calls ----

  /// Interleaves connect(peerHandle) and accept(listenComm) on this thread until
  /// both return a comm (pass NULL sendComm or recvComm to do only one side).
  /// Returns the first error, or kTimedOut.
  ncclResult_t ConnectAccept(int dev, void* peerHandle, void** sendComm, void* listenComm,
                             void** recvComm, Clock::time_point deadline);
  /// Calls isend until it hands out a request (NULL = "receiver not posted yet").
  ncclResult_t PostSend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void** request, Clock::time_point deadline);
  /// Calls test until done. `sizes` as for test().
  ncclResult_t Wait(void* request, int* sizes, Clock::time_point deadline);

 private:
  const Plugin* plugin_;
  int version_;
  const ncclNet_v11_t* t11_ = nullptr;  ///< the v11 table, or the v12 table in v11 slot types
  void* ctx_ = nullptr;
};

/// What a rank usually starts with: the plugin opened, table `version` wrapped in a
/// Net, init called and devices() >= 1. ok() is false (with gtest failures
/// recorded) when any step fails.
class Session {
 public:
  explicit Session(int version = 11, uint64_t commId = 1);
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  bool ok() const { return ok_; }
  Net& net() { return *net_; }
  const Plugin& plugin() const { return plugin_; }
  int ndev() const { return ndev_; }

 private:
  Plugin plugin_;
  std::unique_ptr<Net> net_;
  bool ok_ = false;
  int ndev_ = 0;
};

// ---------------------------------------------------------------------------
// Data and helpers
// ---------------------------------------------------------------------------

/// Fills `bytes` with a pseudo-random pattern determined by `seed`.
void FillPattern(void* data, size_t bytes, uint64_t seed);
/// Offset of the first byte that differs from FillPattern(seed); SIZE_MAX if none.
size_t FirstMismatch(const void* data, size_t bytes, uint64_t seed);
/// Offset of the first byte in [data, data+bytes) that is not `value`; SIZE_MAX if none.
size_t FirstNotEqual(const void* data, size_t bytes, unsigned char value);

/// Uninitialised, page-aligned heap memory (large buffers without a zeroing pass).
class Buffer {
 public:
  explicit Buffer(size_t bytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

/// Result of running an executable with RunExecutable.
struct ExecResult {
  bool started = false;
  bool timedOut = false;
  int exitCode = -1;   ///< when it exited
  int signal = 0;      ///< when a signal ended it
  std::string output;  ///< stdout and stderr, interleaved
};
/// fork + execv(argv) with `setEnv` added to (and `unsetEnv` removed from) this
/// process's environment. Output is read through a pipe with bounded polls; the
/// process is SIGKILLed after `timeout`.
ExecResult RunExecutable(const std::vector<std::string>& argv, const EnvList& setEnv,
                         const std::vector<std::string>& unsetEnv, Ms timeout);

}  // namespace railyard::conformance
