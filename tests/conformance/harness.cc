#include "tests/conformance/harness.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

#ifndef RAILYARD_PLUGIN_PATH
#error "RAILYARD_PLUGIN_PATH must be defined by tests/conformance/CMakeLists.txt"
#endif

extern char** environ;

namespace railyard::conformance {

// ===========================================================================
// Configuration: the one place that knows about transports.
// ===========================================================================

namespace {

struct TransportSettings {
  const char* name;
  EnvList env;  ///< set in every process that loads the plugin
};

/// Every transport the suite knows; nothing else in the suite is transport-specific.
const std::vector<TransportSettings>& Transports() {
  static const std::vector<TransportSettings> kTransports = {
      // Loopback only: "=lo" is an exact-name match, so no other interface (and
      // never eth0) carries test traffic.
      {"tcp", {{"RAILYARD_SOCKET_IFNAME", "=lo"}, {"RAILYARD_TRANSPORT", "tcp"}}},
      // RDMA in the soft-RoCE lane (tests/lanes/rxe): control sockets on loopback,
      // data over the rxe devices. RAILYARD_HCA is per rank (RankEnv below).
      {"verbs", {{"RAILYARD_SOCKET_IFNAME", "=lo"}, {"RAILYARD_TRANSPORT", "verbs"}}},
  };
  return kTransports;
}

/// Per-rank settings: over verbs, rank r is lane host r % hosts and uses that host's
/// rxe devices (RXE_LANE_DEVS_H<h>, e.g. "rxe_h0r0 rxe_h0r1"), so consecutive ranks
/// talk across the lane's rails. RAILYARD_CONFORMANCE_HCA (a RAILYARD_HCA value) pins
/// every rank instead.
EnvList RankEnv(int rank) {
  if (TransportName() != "verbs") return {};
  if (const char* pin = std::getenv("RAILYARD_CONFORMANCE_HCA"); pin != nullptr && *pin) {
    return {{"RAILYARD_HCA", pin}};
  }
  int hosts = 0;
  while (std::getenv(("RXE_LANE_DEVS_H" + std::to_string(hosts)).c_str()) != nullptr) ++hosts;
  if (hosts == 0) return {};
  const std::string var = "RXE_LANE_DEVS_H" + std::to_string(rank % hosts);
  const char* devs = std::getenv(var.c_str());
  if (devs == nullptr) return {};
  std::string list = "=";
  for (const char* c = devs; *c != '\0'; ++c) list += *c == ' ' ? ',' : *c;
  return {{"RAILYARD_HCA", list}};
}

/// Over verbs off the lane (no RDMA device), the whole test binary is skipped:
/// exit 77 before any test runs (ctest SKIP_RETURN_CODE 77).
[[maybe_unused]] const bool kSkipWithoutRdma = [] {
  const char* t = std::getenv("RAILYARD_CONFORMANCE_TRANSPORT");
  if (t == nullptr || std::string(t) != "verbs") return false;
  if (std::getenv("RXE_LANE_DEVS_H0") != nullptr || std::getenv("RAILYARD_CONFORMANCE_HCA") != nullptr) {
    return false;
  }
  std::fprintf(stderr, "conformance over verbs: no soft-RoCE lane here (RXE_LANE_DEVS_H0 unset); skipped "
                       "(run it in the lane: tests/lanes/run-verbs.sh BUILD_DIR)\n");
  std::exit(77);
}();

const TransportSettings* FindTransport() {
  const std::string want = TransportName();
  for (const auto& t : Transports()) {
    if (want == t.name) return &t;
  }
  return nullptr;
}

}  // namespace

namespace {

/// The harness's own variables, read once (before any fork). Rank processes and
/// exec'd helpers drop them from their environment before the plugin loads,
/// because the plugin warns about every unknown RAILYARD_* variable.
struct HarnessEnv {
  std::string transport = "tcp";  ///< RAILYARD_CONFORMANCE_TRANSPORT
  std::string plugin = RAILYARD_PLUGIN_PATH;  ///< RAILYARD_CONFORMANCE_PLUGIN
  bool verbose = false;           ///< RAILYARD_CONFORMANCE_VERBOSE: echo plugin logs
};

const HarnessEnv& Env() {
  static const HarnessEnv env = [] {
    HarnessEnv e;
    if (const char* v = std::getenv("RAILYARD_CONFORMANCE_TRANSPORT"); v && *v) e.transport = v;
    if (const char* v = std::getenv("RAILYARD_CONFORMANCE_PLUGIN"); v && *v) e.plugin = v;
    e.verbose = std::getenv("RAILYARD_CONFORMANCE_VERBOSE") != nullptr;
    return e;
  }();
  return env;
}

void ScrubHarnessEnv() {
  static constexpr char kPrefix[] = "RAILYARD_CONFORMANCE_";
  std::vector<std::string> names;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, kPrefix, sizeof kPrefix - 1) != 0) continue;
    const char* eq = std::strchr(*e, '=');
    names.emplace_back(*e, eq ? static_cast<size_t>(eq - *e) : std::strlen(*e));
  }
  for (const std::string& n : names) ::unsetenv(n.c_str());
}

}  // namespace

std::string TransportName() { return Env().transport; }

std::string TransportError() {
  if (FindTransport() != nullptr) return {};
  return "RAILYARD_CONFORMANCE_TRANSPORT=" + TransportName() +
         " is not a transport the conformance suite knows (see Transports() in "
         "tests/conformance/harness.cc)";
}

EnvList PluginEnv(int timeoutMs) {
  const TransportSettings* t = FindTransport();
  if (t == nullptr) return {};
  EnvList env = t->env;
  env.emplace_back("RAILYARD_TIMEOUT_MS", std::to_string(timeoutMs));
  return env;
}

std::string PluginPath() { return Env().plugin; }

std::string PluginDir() {
  const std::string p = PluginPath();
  const size_t slash = p.rfind('/');
  return slash == std::string::npos ? "." : p.substr(0, slash);
}

// ===========================================================================
// Small POSIX helpers
// ===========================================================================

namespace {

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<Ms>(deadline - Clock::now()).count();
  if (left <= 0) return 0;
  return left > INT_MAX ? INT_MAX : static_cast<int>(left);
}

/// poll() one fd for `events` until `deadline`. 1 ready, 0 timed out, -1 error.
int PollOne(int fd, short events, Clock::time_point deadline, short* revents = nullptr) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (revents != nullptr) *revents = p.revents;
    return rc;
  }
}

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

void CloseFd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

// Messages on the SOCK_SEQPACKET control channel (one record per message).
enum MsgType : char {
  kMsgPids = 'T',     ///< parent → rank: pid of every rank (pid_t[nranks])
  kMsgNote = 'N',     ///< rank → parent: where the rank is (text)
  kMsgKill = 'K',     ///< rank → parent: SIGKILL rank (int)
  kMsgKilled = 'k',   ///< parent → rank: the rank is dead and reaped (int: 1 ok)
  kMsgPass = 'P',     ///< rank → parent: body finished without failures
  kMsgFail = 'F',     ///< rank → parent: failures (text)
};

bool SendRecord(int fd, char type, const void* payload, size_t bytes) {
  std::string msg(1, type);
  msg.append(static_cast<const char*>(payload), std::min<size_t>(bytes, 60000));
  for (;;) {
    const ssize_t n = ::send(fd, msg.data(), msg.size(), MSG_NOSIGNAL);
    if (n >= 0) return true;
    if (errno != EINTR) return false;
  }
}

/// Receives one record; false on EOF/error. Waits until `deadline` if blocking.
bool RecvRecord(int fd, Clock::time_point deadline, char* type, std::string* payload) {
  if (PollOne(fd, POLLIN, deadline) <= 0) return false;
  std::string buf(65536, '\0');
  ssize_t n;
  do {
    n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  *type = buf[0];
  payload->assign(buf.data() + 1, static_cast<size_t>(n) - 1);
  return true;
}

// ---- gtest failures inside a rank process ----

/// Appended to the rank's copy of gtest's listeners: collects every failed
/// assertion so the rank can send them to the parent.
class FailureCollector : public ::testing::EmptyTestEventListener {
 public:
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::ostringstream os;
    os << (r.file_name() ? r.file_name() : "?") << ":" << r.line_number() << ": "
       << r.message() << "\n";
    text += os.str();
  }
  std::string text;
};

}  // namespace

struct RankAccess {
  static Rank Make(int rank, int nranks, int control, std::vector<int> peers,
                   Clock::time_point deadline, int pluginTimeoutMs) {
    Rank r;
    r.rank_ = rank;
    r.nranks_ = nranks;
    r.control_ = control;
    r.peers_ = std::move(peers);
    r.deadline_ = deadline;
    r.pluginTimeoutMs_ = pluginTimeoutMs;
    return r;
  }
  static void SetPids(Rank& r, std::vector<pid_t> pids) { r.pids_ = std::move(pids); }
  static int Control(const Rank& r) { return r.control_; }
};

// ===========================================================================
// Rank (child side)
// ===========================================================================

bool Rank::SendFd(int fd, const void* data, size_t bytes, const std::string& who) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    short rev = 0;
    const int rc = PollOne(fd, POLLOUT, deadline_, &rev);
    if (rc <= 0) {
      ADD_FAILURE() << "rank " << rank_ << ": timed out sending to " << who;
      return false;
    }
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      ADD_FAILURE() << "rank " << rank_ << ": send to " << who << " failed: "
                    << std::strerror(errno) << " (did it exit?)";
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool Rank::RecvFd(int fd, void* data, size_t bytes, const std::string& who) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const int rc = PollOne(fd, POLLIN, deadline_);
    if (rc <= 0) {
      ADD_FAILURE() << "rank " << rank_ << ": timed out waiting for " << who;
      return false;
    }
    const ssize_t n = ::recv(fd, p, bytes, MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      ADD_FAILURE() << "rank " << rank_ << ": receive from " << who << " failed: "
                    << std::strerror(errno);
      return false;
    }
    if (n == 0) {
      ADD_FAILURE() << "rank " << rank_ << ": " << who << " closed its channel (it exited or died)";
      return false;
    }
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool Rank::Send(int peer, const void* data, size_t bytes) {
  return SendFd(peers_.at(static_cast<size_t>(peer)), data, bytes, "rank " + std::to_string(peer));
}

bool Rank::Recv(int peer, void* data, size_t bytes) {
  return RecvFd(peers_.at(static_cast<size_t>(peer)), data, bytes, "rank " + std::to_string(peer));
}

bool Rank::Expect(int peer, uint64_t expected) {
  uint64_t v = 0;
  if (!RecvU64(peer, &v)) return false;
  EXPECT_EQ(v, expected) << "rank " << rank_ << ": unexpected token from rank " << peer;
  return v == expected;
}

bool Rank::Barrier() {
  const uint64_t token = 0xBA5513E5ull;
  for (int p = 0; p < nranks_; ++p) {
    if (p != rank_ && !SendU64(p, token)) return false;
  }
  for (int p = 0; p < nranks_; ++p) {
    if (p != rank_ && !Expect(p, token)) return false;
  }
  return true;
}

void Rank::Note(const std::string& where) {
  (void)SendRecord(control_, kMsgNote, where.data(), where.size());
}

bool Rank::Kill(int r) {
  if (!SendRecord(control_, kMsgKill, &r, sizeof r)) {
    ADD_FAILURE() << "rank " << rank_ << ": cannot ask the parent to kill rank " << r;
    return false;
  }
  char type = 0;
  std::string payload;
  if (!RecvRecord(control_, deadline_, &type, &payload) || type != kMsgKilled ||
      payload.size() != sizeof(int)) {
    ADD_FAILURE() << "rank " << rank_ << ": no confirmation that rank " << r << " was killed";
    return false;
  }
  int ok = 0;
  std::memcpy(&ok, payload.data(), sizeof ok);
  EXPECT_EQ(ok, 1) << "the parent could not kill rank " << r;
  return ok == 1;
}

// ===========================================================================
// RunRanks (parent side)
// ===========================================================================

namespace {

struct Child {
  pid_t pid = -1;
  int control = -1;
  int pidfd = -1;
  bool reported = false;
  bool passed = false;
  bool exited = false;
  bool killedOnRequest = false;
  bool hung = false;
  int status = 0;
  std::string failure;
  std::string note = "(no note yet)";
};

[[noreturn]] void RunChild(int rank, const RunOptions& opts, int control, std::vector<int> peers,
                           pid_t parent, const std::function<void(Rank&)>& body) {
  // Die with the parent (e.g. when ctest kills the test binary).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(3);

  const auto margin = std::min<Ms>(Ms(2000), opts.timeout / 4);
  Rank self = RankAccess::Make(rank, opts.nranks, control, std::move(peers),
                               Clock::now() + opts.timeout - margin, opts.pluginTimeoutMs);

  auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
  delete listeners.Release(listeners.default_result_printer());
  auto* collector = new FailureCollector();  // owned by gtest; the process _exits
  listeners.Append(collector);

  // The pid table arrives once every rank is forked.
  char type = 0;
  std::string payload;
  if (!RecvRecord(control, self.deadline(), &type, &payload) || type != kMsgPids ||
      payload.size() != sizeof(pid_t) * static_cast<size_t>(opts.nranks)) {
    ADD_FAILURE() << "rank " << rank << ": no pid table from the parent";
  } else {
    std::vector<pid_t> pids(static_cast<size_t>(opts.nranks));
    std::memcpy(pids.data(), payload.data(), payload.size());
    RankAccess::SetPids(self, std::move(pids));

    for (const auto& [k, v] : PluginEnv(opts.pluginTimeoutMs)) ::setenv(k.c_str(), v.c_str(), 1);
    for (const auto& [k, v] : RankEnv(rank)) ::setenv(k.c_str(), v.c_str(), 1);
    ScrubHarnessEnv();
    try {
      body(self);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "rank " << rank << ": exception: " << e.what();
    } catch (...) {
      ADD_FAILURE() << "rank " << rank << ": unknown exception";
    }
  }
  if (collector->text.empty()) {
    (void)SendRecord(control, kMsgPass, "", 0);
  } else {
    (void)SendRecord(control, kMsgFail, collector->text.data(), collector->text.size());
  }
  ::_exit(0);  // no atexit handlers, no gtest teardown in the child
}

void Reap(Child& c) {
  if (c.exited) return;
  int st = 0;
  const pid_t r = ::waitpid(c.pid, &st, WNOHANG);
  if (r == c.pid) {
    c.exited = true;
    c.status = st;
  }
}

/// Reads every record the child has queued; handles kill requests.
void Drain(std::vector<Child>& kids, size_t i, Clock::time_point deadline) {
  Child& c = kids[i];
  for (;;) {
    if (c.control < 0) return;
    std::string buf(65536, '\0');
    const ssize_t n = ::recv(c.control, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return;  // nothing more now
    if (n == 0) {
      CloseFd(c.control);
      return;
    }
    const char type = buf[0];
    const std::string payload(buf.data() + 1, static_cast<size_t>(n) - 1);
    if (type == kMsgNote) {
      c.note = payload;
    } else if (type == kMsgPass) {
      c.reported = true;
      c.passed = true;
    } else if (type == kMsgFail) {
      c.reported = true;
      c.failure = payload;
    } else if (type == kMsgKill && payload.size() == sizeof(int)) {
      int target = -1;
      std::memcpy(&target, payload.data(), sizeof target);
      int ok = 0;
      if (target >= 0 && target < static_cast<int>(kids.size()) && target != static_cast<int>(i)) {
        Child& t = kids[static_cast<size_t>(target)];
        t.killedOnRequest = true;
        if (!t.exited) {
          ::kill(t.pid, SIGKILL);
          if (PollOne(t.pidfd, POLLIN, deadline) > 0) Reap(t);
        }
        ok = t.exited ? 1 : 0;
      }
      (void)SendRecord(c.control, kMsgKilled, &ok, sizeof ok);
    }
  }
}

std::string Describe(int status) {
  if (WIFSIGNALED(status)) {
    return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  return "ended with wait status " + std::to_string(status);
}

}  // namespace

std::vector<std::string> RunRanksReport(const RunOptions& opts,
                                        const std::function<void(Rank&)>& body) {
  std::vector<std::string> failures;
  auto fail = [&failures](const std::string& what) {
    failures.push_back(what);
    return failures;
  };
  (void)Env();  // read the harness's variables before forking
  if (const std::string err = TransportError(); !err.empty()) return fail(err);
  if (opts.nranks < 1) return fail("RunRanks needs at least one rank");
  const size_t n = static_cast<size_t>(opts.nranks);
  std::fflush(nullptr);  // nothing buffered gets written twice

  // Channels, all created before fork: control[i] (parent end, rank end) and one
  // stream socketpair per pair of ranks.
  std::vector<std::array<int, 2>> control(n, {-1, -1});
  std::vector<std::vector<int>> peer(n, std::vector<int>(n, -1));  // peer[i][j]: i's end to j
  for (size_t i = 0; i < n; ++i) {
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, control[i].data()) != 0) {
      return fail(std::string("socketpair: ") + std::strerror(errno));
    }
    for (size_t j = i + 1; j < n; ++j) {
      int sv[2];
      if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        return fail(std::string("socketpair: ") + std::strerror(errno));
      }
      peer[i][j] = sv[0];
      peer[j][i] = sv[1];
    }
  }

  const pid_t parent = ::getpid();
  const auto start = Clock::now();
  const auto deadline = start + opts.timeout;
  std::vector<Child> kids(n);
  for (size_t i = 0; i < n; ++i) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      const std::string why = std::string("fork: ") + std::strerror(errno);
      for (size_t k = 0; k < i; ++k) ::kill(kids[k].pid, SIGKILL);
      for (size_t k = 0; k < i; ++k) ::waitpid(kids[k].pid, nullptr, 0);  // just SIGKILLed
      return fail(why);
    }
    if (pid == 0) {
      // Keep only this rank's ends, so a dead peer shows up as EOF.
      for (size_t k = 0; k < n; ++k) {
        ::close(control[k][0]);
        if (k != i) ::close(control[k][1]);
        for (size_t j = 0; j < n; ++j) {
          if (k != i && peer[k][j] >= 0) ::close(peer[k][j]);
        }
      }
      RunChild(static_cast<int>(i), opts, control[i][1], peer[i], parent, body);
    }
    kids[i].pid = pid;
    kids[i].control = control[i][0];
    kids[i].pidfd = PidfdOpen(pid);
  }
  for (size_t i = 0; i < n; ++i) {
    ::close(control[i][1]);
    for (int fd : peer[i]) {
      if (fd >= 0) ::close(fd);
    }
  }
  std::vector<pid_t> pids;
  for (const Child& c : kids) pids.push_back(c.pid);
  for (Child& c : kids) {
    (void)SendRecord(c.control, kMsgPids, pids.data(), pids.size() * sizeof(pid_t));
  }

  // Event loop: control records and process exits, bounded by the run deadline.
  for (;;) {
    bool all = true;
    for (Child& c : kids) all = all && c.exited;
    if (all || Clock::now() >= deadline) break;
    std::vector<pollfd> pfds;
    std::vector<std::pair<size_t, bool>> what;  // (child, is pidfd)
    for (size_t i = 0; i < n; ++i) {
      if (kids[i].control >= 0) {
        pfds.push_back({kids[i].control, POLLIN, 0});
        what.emplace_back(i, false);
      }
      if (!kids[i].exited && kids[i].pidfd >= 0) {
        pfds.push_back({kids[i].pidfd, POLLIN, 0});
        what.emplace_back(i, true);
      }
    }
    const int rc = ::poll(pfds.data(), pfds.size(), RemainingMs(deadline));
    if (rc < 0 && errno != EINTR) {
      fail(std::string("poll: ") + std::strerror(errno));
      break;
    }
    for (size_t k = 0; k < pfds.size(); ++k) {
      if (pfds[k].revents == 0) continue;
      const size_t i = what[k].first;
      if (what[k].second) {
        Drain(kids, i, deadline);  // its last records are queued before its exit
        Reap(kids[i]);
      } else {
        Drain(kids, i, deadline);
      }
    }
  }

  // Whatever is still running hung: kill it, reap it, name it.
  const auto elapsed = std::chrono::duration_cast<Ms>(Clock::now() - start).count();
  for (size_t i = 0; i < n; ++i) {
    Child& c = kids[i];
    if (c.exited) continue;
    Drain(kids, i, deadline);
    std::ostringstream os;
    os << "rank " << i << " (pid " << c.pid << ") hung: no exit within " << opts.timeout.count()
       << " ms (ran " << elapsed << " ms); last note: " << c.note
       << (c.reported ? " [it had reported a result]" : "")
       << (c.failure.empty() ? "" : "\nits failures:\n" + c.failure);
    fail(os.str());
    c.hung = true;
    ::kill(c.pid, SIGKILL);
  }
  for (Child& c : kids) {
    if (!c.exited) {
      if (::waitpid(c.pid, &c.status, 0) == c.pid) c.exited = true;  // SIGKILLed just above
    }
    CloseFd(c.control);
    CloseFd(c.pidfd);
  }
  for (size_t i = 0; i < n; ++i) {
    const Child& c = kids[i];
    if (c.killedOnRequest || c.hung) continue;  // injected, or reported above
    const std::string who = "rank " + std::to_string(i) + " (pid " + std::to_string(c.pid) + ") ";
    if (!c.failure.empty()) {
      fail(who + "failed:\n" + c.failure);
    } else if (!c.reported && c.exited) {
      fail(who + Describe(c.status) + " before reporting; last note: " + c.note);
    } else if (c.reported && c.exited && !(WIFEXITED(c.status) && WEXITSTATUS(c.status) == 0)) {
      fail(who + "reported, then " + Describe(c.status));
    }
  }
  return failures;
}

void RunRanks(const RunOptions& opts, const std::function<void(Rank&)>& body) {
  for (const std::string& f : RunRanksReport(opts, body)) ADD_FAILURE() << f;
}



// ===========================================================================
// Plugin loading and logging
// ===========================================================================

Plugin OpenPlugin(const std::string& path) {
  Plugin p;
  p.lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (p.lib == nullptr) {
    const char* err = ::dlerror();
    ADD_FAILURE() << "dlopen(" << path << "): " << (err ? err : "?");
    return p;
  }
  p.v12 = static_cast<const ncclNet_v12_t*>(::dlsym(p.lib, "ncclNetPlugin_v12"));
  p.v11 = static_cast<const ncclNet_v11_t*>(::dlsym(p.lib, "ncclNetPlugin_v11"));
  p.v10 = static_cast<const ncclNet_v10_t*>(::dlsym(p.lib, "ncclNetPlugin_v10"));
  p.v9 = static_cast<const ncclNet_v9_t*>(::dlsym(p.lib, "ncclNetPlugin_v9"));
  p.v8 = static_cast<const ncclNet_v8_t*>(::dlsym(p.lib, "ncclNetPlugin_v8"));
  return p;
}

namespace {
std::mutex& LogMu() {
  static std::mutex* mu = new std::mutex();
  return *mu;
}
std::vector<LogLine>& LogLines() {
  static auto* lines = new std::vector<LogLine>();
  return *lines;
}
std::condition_variable& LogCv() {
  static auto* cv = new std::condition_variable();
  return *cv;
}
}  // namespace

void CapturingLogger(ncclDebugLogLevel level, unsigned long flags, const char* file, int line,
                     const char* fmt, ...) {
  char buf[4096];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  {
    std::lock_guard lock(LogMu());
    LogLines().push_back(LogLine{level, flags, buf});
  }
  LogCv().notify_all();
  if (Env().verbose) {
    std::fprintf(stderr, "[pid %d] plugin log %d %s:%d %s\n", static_cast<int>(::getpid()),
                 static_cast<int>(level), file ? file : "?", line, buf);
  }
}

std::vector<LogLine> CapturedLog() {
  std::lock_guard lock(LogMu());
  return LogLines();
}

std::string CapturedWarnings() {
  std::string s;
  for (const LogLine& l : CapturedLog()) {
    if (l.level == NCCL_LOG_WARN) s += "  WARN " + l.text + "\n";
  }
  return s.empty() ? "  (no WARN lines)\n" : s;
}

std::string WaitForWarning(const std::function<bool(const std::string&)>& match,
                           Clock::time_point deadline) {
  std::unique_lock lock(LogMu());
  std::string found;
  LogCv().wait_until(lock, deadline, [&] {
    for (const LogLine& l : LogLines()) {
      if (l.level == NCCL_LOG_WARN && match(l.text)) {
        found = l.text;
        return true;
      }
    }
    return false;
  });
  return found;
}

std::string FindWarning(const std::vector<std::string>& needles) {
  for (const LogLine& l : CapturedLog()) {
    if (l.level != NCCL_LOG_WARN) continue;
    bool all = true;
    for (const std::string& n : needles) all = all && l.text.find(n) != std::string::npos;
    if (all) return l.text;
  }
  return {};
}

// ===========================================================================
// Net: one table version, v11-shaped
// ===========================================================================

Net::Net(const Plugin& plugin, int version) : plugin_(&plugin), version_(version) {
  // Same slot offsets and (for every slot Net calls) the same signatures: net_v12.h.
  static_assert(sizeof(ncclNet_v12_t) == sizeof(ncclNet_v11_t));
  t11_ = version == 12 ? reinterpret_cast<const ncclNet_v11_t*>(plugin.v12) : plugin.v11;
}

#define RY_TABLE_CALL(v11call, v10call, v9call, v8call)                          \
  switch (version_) {                                                            \
    case 12:                                                                     \
    case 11: return t11_ ? (v11call) : ncclInternalError;                        \
    case 10: return plugin_->v10 ? (v10call) : ncclInternalError;                \
    case 9: return plugin_->v9 ? (v9call) : ncclInternalError;                   \
    case 8: return plugin_->v8 ? (v8call) : ncclInternalError;                   \
    default: return ncclInternalError;                                           \
  }

const char* Net::name() const {
  switch (version_) {
    case 12: return plugin_->v12 ? plugin_->v12->name : nullptr;
    case 11: return plugin_->v11 ? plugin_->v11->name : nullptr;
    case 10: return plugin_->v10 ? plugin_->v10->name : nullptr;
    case 9: return plugin_->v9 ? plugin_->v9->name : nullptr;
    case 8: return plugin_->v8 ? plugin_->v8->name : nullptr;
    default: return nullptr;
  }
}

ncclResult_t Net::Init(uint64_t commId) {
  ncclNetCommConfig_v11_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  RY_TABLE_CALL(t11_->init(&ctx_, commId, &config, &CapturingLogger, nullptr),
                plugin_->v10->init(&CapturingLogger, nullptr),
                plugin_->v9->init(&CapturingLogger), plugin_->v8->init(&CapturingLogger));
}

ncclResult_t Net::Finalize() {
  if (version_ != 11 && version_ != 12) return ncclSuccess;
  if (t11_ == nullptr) return ncclInternalError;
  const ncclResult_t rc = t11_->finalize(ctx_);
  ctx_ = nullptr;
  return rc;
}

ncclResult_t Net::Devices(int* ndev) {
  RY_TABLE_CALL(t11_->devices(ndev), plugin_->v10->devices(ndev),
                plugin_->v9->devices(ndev), plugin_->v8->devices(ndev));
}

ncclResult_t Net::Listen(int dev, void* handle, void** listenComm) {
  RY_TABLE_CALL(t11_->listen(ctx_, dev, handle, listenComm),
                plugin_->v10->listen(dev, handle, listenComm),
                plugin_->v9->listen(dev, handle, listenComm),
                plugin_->v8->listen(dev, handle, listenComm));
}

ncclResult_t Net::Connect(int dev, void* handle, void** sendComm) {
  ncclNetCommConfig_v10_t config{NCCL_NET_TRAFFIC_CLASS_UNDEF};
  ncclNetDeviceHandle_v11_t* devComm = nullptr;  // a host plugin leaves it NULL
  RY_TABLE_CALL(t11_->connect(ctx_, dev, handle, sendComm, &devComm),
                plugin_->v10->connect(dev, &config, handle, sendComm, &devComm),
                plugin_->v9->connect(dev, handle, sendComm, &devComm),
                plugin_->v8->connect(dev, handle, sendComm, &devComm));
}

ncclResult_t Net::Accept(void* listenComm, void** recvComm) {
  ncclNetDeviceHandle_v11_t* devComm = nullptr;
  RY_TABLE_CALL(t11_->accept(listenComm, recvComm, &devComm),
                plugin_->v10->accept(listenComm, recvComm, &devComm),
                plugin_->v9->accept(listenComm, recvComm, &devComm),
                plugin_->v8->accept(listenComm, recvComm, &devComm));
}

ncclResult_t Net::RegMr(void* comm, void* data, size_t size, void** mhandle) {
  RY_TABLE_CALL(t11_->regMr(comm, data, size, NCCL_PTR_HOST, mhandle),
                plugin_->v10->regMr(comm, data, size, NCCL_PTR_HOST, mhandle),
                plugin_->v9->regMr(comm, data, size, NCCL_PTR_HOST, mhandle),
                plugin_->v8->regMr(comm, data, size, NCCL_PTR_HOST, mhandle));
}

ncclResult_t Net::DeregMr(void* comm, void* mhandle) {
  RY_TABLE_CALL(t11_->deregMr(comm, mhandle), plugin_->v10->deregMr(comm, mhandle),
                plugin_->v9->deregMr(comm, mhandle), plugin_->v8->deregMr(comm, mhandle));
}

ncclResult_t Net::Isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                        void** request) {
  if (version_ == 8 && size > static_cast<size_t>(INT_MAX)) return ncclInvalidArgument;
  RY_TABLE_CALL(t11_->isend(sendComm, data, size, tag, mhandle, nullptr, request),
                plugin_->v10->isend(sendComm, data, size, tag, mhandle, nullptr, request),
                plugin_->v9->isend(sendComm, data, size, tag, mhandle, request),
                plugin_->v8->isend(sendComm, data, static_cast<int>(size), tag, mhandle, request));
}

ncclResult_t Net::Irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                        void** mhandles, void** request) {
  int isizes[64] = {};
  if (version_ == 8) {
    if (n < 0 || n > static_cast<int>(std::size(isizes))) return ncclInvalidArgument;
    for (int i = 0; i < n; ++i) {
      if (sizes[i] > static_cast<size_t>(INT_MAX)) return ncclInvalidArgument;
      isizes[i] = static_cast<int>(sizes[i]);
    }
  }
  void* phandles[64] = {};
  RY_TABLE_CALL(
      t11_->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request),
      plugin_->v10->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request),
      plugin_->v9->irecv(recvComm, n, data, sizes, tags, mhandles, request),
      plugin_->v8->irecv(recvComm, n, data, isizes, tags, mhandles, request));
}

ncclResult_t Net::Test(void* request, int* done, int* sizes) {
  RY_TABLE_CALL(t11_->test(request, done, sizes), plugin_->v10->test(request, done, sizes),
                plugin_->v9->test(request, done, sizes), plugin_->v8->test(request, done, sizes));
}

ncclResult_t Net::CloseSend(void* c) {
  RY_TABLE_CALL(t11_->closeSend(c), plugin_->v10->closeSend(c), plugin_->v9->closeSend(c),
                plugin_->v8->closeSend(c));
}

ncclResult_t Net::CloseRecv(void* c) {
  RY_TABLE_CALL(t11_->closeRecv(c), plugin_->v10->closeRecv(c), plugin_->v9->closeRecv(c),
                plugin_->v8->closeRecv(c));
}

ncclResult_t Net::CloseListen(void* c) {
  RY_TABLE_CALL(t11_->closeListen(c), plugin_->v10->closeListen(c),
                plugin_->v9->closeListen(c), plugin_->v8->closeListen(c));
}

#undef RY_TABLE_CALL

ncclResult_t Net::ConnectAccept(int dev, void* peerHandle, void** sendComm, void* listenComm,
                                void** recvComm, Clock::time_point deadline) {
  bool needSend = sendComm != nullptr;
  bool needRecv = recvComm != nullptr;
  if (needSend) *sendComm = nullptr;
  if (needRecv) *recvComm = nullptr;
  while (needSend || needRecv) {
    if (needSend) {
      const ncclResult_t rc = Connect(dev, peerHandle, sendComm);
      if (rc != ncclSuccess) return rc;
      needSend = *sendComm == nullptr;
    }
    if (needRecv) {
      const ncclResult_t rc = Accept(listenComm, recvComm);
      if (rc != ncclSuccess) return rc;
      needRecv = *recvComm == nullptr;
    }
    if ((needSend || needRecv) && Clock::now() >= deadline) return kTimedOut;
    ::sched_yield();
  }
  return ncclSuccess;
}

ncclResult_t Net::PostSend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                           void** request, Clock::time_point deadline) {
  *request = nullptr;
  for (;;) {
    const ncclResult_t rc = Isend(sendComm, data, size, tag, mhandle, request);
    if (rc != ncclSuccess || *request != nullptr) return rc;
    if (Clock::now() >= deadline) return kTimedOut;
    ::sched_yield();
  }
}

ncclResult_t Net::Wait(void* request, int* sizes, Clock::time_point deadline) {
  for (;;) {
    int done = 0;
    const ncclResult_t rc = Test(request, &done, sizes);
    if (rc != ncclSuccess || done) return rc;
    if (Clock::now() >= deadline) return kTimedOut;
    ::sched_yield();
  }
}

Session::Session(int version, uint64_t commId) {
  plugin_ = OpenPlugin();
  net_ = std::make_unique<Net>(plugin_, version);
  if (plugin_.lib == nullptr) return;
  if (net_->name() == nullptr) {
    ADD_FAILURE() << "the plugin exports no ncclNetPlugin_v" << version;
    return;
  }
  const ncclResult_t rc = net_->Init(commId);
  if (rc != ncclSuccess) {
    ADD_FAILURE() << "v" << version << " init returned " << rc << "\n" << CapturedWarnings();
    return;
  }
  if (net_->Devices(&ndev_) != ncclSuccess || ndev_ < 1) {
    ADD_FAILURE() << "v" << version << " devices() failed or reported " << ndev_ << " devices";
    return;
  }
  ok_ = true;
}

// ===========================================================================
// Data helpers
// ===========================================================================

namespace {
inline uint64_t SplitMix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}
inline uint64_t Word(uint64_t seed, size_t j) { return SplitMix(seed * 0x100000001B3ull + j); }
}  // namespace

void FillPattern(void* data, size_t bytes, uint64_t seed) {
  char* p = static_cast<char*>(data);
  const size_t words = bytes / 8;
  for (size_t j = 0; j < words; ++j) {
    const uint64_t w = Word(seed, j);
    std::memcpy(p + j * 8, &w, 8);
  }
  if (bytes % 8 != 0) {
    const uint64_t w = Word(seed, words);
    std::memcpy(p + words * 8, &w, bytes % 8);
  }
}

size_t FirstMismatch(const void* data, size_t bytes, uint64_t seed) {
  const char* p = static_cast<const char*>(data);
  const size_t words = (bytes + 7) / 8;
  for (size_t j = 0; j < words; ++j) {
    const uint64_t w = Word(seed, j);
    const size_t len = std::min<size_t>(8, bytes - j * 8);
    if (std::memcmp(p + j * 8, &w, len) != 0) {
      for (size_t b = 0; b < len; ++b) {
        if (p[j * 8 + b] != reinterpret_cast<const char*>(&w)[b]) return j * 8 + b;
      }
    }
  }
  return SIZE_MAX;
}

size_t FirstNotEqual(const void* data, size_t bytes, unsigned char value) {
  const auto* p = static_cast<const unsigned char*>(data);
  unsigned char block[65536];
  std::memset(block, value, sizeof block);
  for (size_t off = 0; off < bytes; off += sizeof block) {
    const size_t len = std::min(sizeof block, bytes - off);
    if (std::memcmp(p + off, block, len) == 0) continue;  // fast path: memcmp per block
    for (size_t i = off; i < off + len; ++i) {
      if (p[i] != value) return i;
    }
  }
  return SIZE_MAX;
}

Buffer::Buffer(size_t bytes) : size_(bytes) {
  void* p = ::mmap(nullptr, std::max<size_t>(bytes, 1), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  data_ = static_cast<char*>(p);
}

Buffer::~Buffer() { ::munmap(data_, std::max<size_t>(size_, 1)); }

// ===========================================================================
// RunExecutable
// ===========================================================================

ExecResult RunExecutable(const std::vector<std::string>& argv, const EnvList& setEnv,
                         const std::vector<std::string>& unsetEnv, Ms timeout) {
  ExecResult r;
  (void)Env();
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return r;
  std::fflush(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return r;
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    for (const auto& [k, v] : setEnv) ::setenv(k.c_str(), v.c_str(), 1);
    for (const auto& k : unsetEnv) ::unsetenv(k.c_str());
    ScrubHarnessEnv();
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execve(args[0], args.data(), environ);
    std::fprintf(stderr, "execve(%s): %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  ::close(out[1]);
  r.started = true;
  const int pidfd = PidfdOpen(pid);
  const auto deadline = Clock::now() + timeout;
  bool eof = false;
  bool exited = false;
  int status = 0;
  while (!(eof && exited)) {
    pollfd p[2] = {{eof ? -1 : out[0], POLLIN, 0}, {exited ? -1 : pidfd, POLLIN, 0}};
    const int rc = ::poll(p, 2, RemainingMs(deadline));
    if (rc < 0 && errno == EINTR) continue;
    if (rc <= 0) {
      r.timedOut = true;
      break;
    }
    if (p[0].revents != 0) {
      char buf[4096];
      const ssize_t n = ::read(out[0], buf, sizeof buf);
      if (n > 0) {
        r.output.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        eof = true;
      }
    }
    if (p[1].revents != 0 && ::waitpid(pid, &status, WNOHANG) == pid) exited = true;
  }
  if (!exited) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);  // just SIGKILLed
  }
  ::close(out[0]);
  if (pidfd >= 0) ::close(pidfd);
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace railyard::conformance
