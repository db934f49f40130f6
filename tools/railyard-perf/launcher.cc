#include "tools/railyard-perf/launcher.h"

#include <cerrno>
#include <sys/mman.h>
#include <sys/prctl.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace railyard::perf {
namespace {

pid_t g_launcher = 0;  ///< the launcher's pid, recorded before the ranks fork
/// In a forked rank: its kRankErrorBytes slot of the launcher's shared page (MAP_SHARED,
/// so the launcher reads what the rank wrote); null elsewhere (multi-host ranks).
char* g_errorSlot = nullptr;

/// Runs in the child: connect the bootstrap, run the rank, never return.
[[noreturn]] void ChildMain(int rank, int nranks, const Listener& l, int timeoutSec,
                            const sigset_t& oldMask, const RankMain& rankMain) {
  (void)sigprocmask(SIG_SETMASK, &oldMask, nullptr);
  // A rank never outlives the launcher: if it is killed (SIGKILL, or anything that
  // bypasses its own clean-up), the kernel kills the ranks too.
  (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (getppid() != g_launcher) _exit(1);  // the launcher died before prctl took effect
  int rc = 1;
  {
    const Deadline deadline = DeadlineIn(timeoutSec);
    Bootstrap boot;
    Status s;
    if (rank == 0) {
      s = Bootstrap::CreateRoot(l.fd, nranks, deadline, &boot);
    } else {
      CloseFd(l.fd);
      s = Bootstrap::Join("127.0.0.1", l.port, rank, nranks, deadline, &boot);
    }
    if (!s.ok()) {
      PrintRankError(rank, s.message());
    } else {
      rc = rankMain(boot);
    }
  }
  std::fflush(nullptr);
  _exit(rc);
}

std::string Describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

}  // namespace

void PrintRankError(int rank, const std::string& text) {
  std::fprintf(stderr, "railyard-perf: rank %d: %s\n", rank, text.c_str());
  if (g_errorSlot != nullptr && g_errorSlot[0] == '\0') {
    const std::size_t n = std::min(text.size(), kRankErrorBytes - 1);
    std::memcpy(g_errorSlot, text.data(), n);
    g_errorSlot[n] = '\0';
  }
}

LaunchResult LaunchLocal(int nranks, int timeoutSec, const RankMain& rankMain) {
  LaunchResult result;
  Listener l;
  if (Status s = ListenTcp("127.0.0.1", 0, &l); !s.ok()) {
    result.exitCode = 1;
    result.message = s.message();
    return result;
  }
  // SIGCHLD stays blocked in the parent so sigtimedwait can wait for it with a
  // timeout; SIGINT and SIGTERM too, so an interrupted launcher stops its ranks
  // (SIGTERM, then SIGKILL) and reports, instead of leaving them running.
  sigset_t chld, oldMask;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  sigaddset(&chld, SIGINT);
  sigaddset(&chld, SIGTERM);
  (void)sigprocmask(SIG_BLOCK, &chld, &oldMask);

  // One error slot per rank, zeroed by the kernel; without it (mmap failed) the ranks
  // still print their errors, and the launcher only knows how they exited.
  const std::size_t slotBytes = std::size_t(nranks) * kRankErrorBytes;
  void* slots = ::mmap(nullptr, slotBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) slots = nullptr;
  std::fflush(nullptr);
  g_launcher = getpid();
  std::vector<pid_t> pids(std::size_t(nranks), -1);
  for (int r = 0; r < nranks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      if (slots != nullptr) g_errorSlot = static_cast<char*>(slots) + std::size_t(r) * kRankErrorBytes;
      ChildMain(r, nranks, l, timeoutSec, oldMask, rankMain);
    }
    if (pid < 0) {
      result.exitCode = 1;
      result.failedRank = r;
      result.message = std::string("fork for rank ") + std::to_string(r) + " failed: " + std::strerror(errno);
      break;
    }
    pids[std::size_t(r)] = pid;
  }
  CloseFd(l.fd);

  int running = 0;
  for (pid_t p : pids) running += p > 0 ? 1 : 0;
  const Deadline deadline = DeadlineIn(timeoutSec);
  // Once a rank has failed: SIGTERM the rest at termAt, SIGKILL at killAt.
  bool failing = !result.message.empty();  // fork failure: stop the ones that started
  bool sentTerm = false, sentKill = false;
  Deadline termAt = std::chrono::steady_clock::now();
  Deadline killAt = termAt + std::chrono::seconds(5);
  auto signalAll = [&](int sig) {
    for (pid_t p : pids) if (p > 0) (void)kill(p, sig);
  };
  // SIGTERM, then SIGCONT: a stopped rank (SIGSTOP, a debugger's detach) gets the
  // SIGTERM only once it runs again (new-user trial: a SIGSTOPped rank cost the whole
  // 5 s until SIGKILL).
  auto terminateAll = [&] {
    signalAll(SIGTERM);
    signalAll(SIGCONT);
  };

  while (running > 0) {
    // Reap whatever has ended.
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] != pid) continue;
        pids[r] = -1;
        --running;
        const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        if (ok) continue;
        const bool secondary = WIFEXITED(status) && WEXITSTATUS(status) == kExitPeerFailed;
        const bool replace = result.failedRank >= 0 && result.exitCode == kExitPeerFailed &&
                             WIFEXITED(status) && !secondary;
        if (!failing || replace) {
          result.failedRank = int(r);
          result.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
          result.message = "rank " + std::to_string(r) + " " + Describe(status) + "; stopping the other ranks";
        }
        if (!failing) {
          failing = true;
          // A rank that stopped because of another one: give the culprit a moment to report itself.
          termAt = secondary ? DeadlineIn(2) : std::chrono::steady_clock::now();
          killAt = termAt + std::chrono::seconds(5);
        }
      }
    }
    if (running == 0) break;
    const auto now = std::chrono::steady_clock::now();
    if (!failing && now >= deadline) {
      std::string still;
      for (std::size_t r = 0; r < pids.size(); ++r) {
        if (pids[r] > 0) still += (still.empty() ? "" : ",") + std::to_string(r);
      }
      result.exitCode = 1;
      result.timedOut = true;
      result.message = "timeout: -T " + std::to_string(timeoutSec) + " s expired; killing ranks still running: " + still;
      failing = sentTerm = sentKill = true;
      signalAll(SIGKILL);
    }
    if (failing && !sentTerm && now >= termAt) {
      sentTerm = true;
      terminateAll();
    }
    if (failing && !sentKill && now >= killAt) {
      sentKill = true;
      signalAll(SIGKILL);
    }
    const Deadline wakeAt = !failing ? deadline : sentKill ? DeadlineIn(1) : sentTerm ? killAt : termAt;
    const auto left = std::max(wakeAt - std::chrono::steady_clock::now(), std::chrono::steady_clock::duration(0));
    const auto secs = std::chrono::duration_cast<std::chrono::seconds>(left);
    timespec ts{};
    ts.tv_sec = secs.count();
    ts.tv_nsec = long(std::chrono::duration_cast<std::chrono::nanoseconds>(left - secs).count());
    const int sig = sigtimedwait(&chld, nullptr, &ts);  // SIGCHLD, timeout or EINTR: loop and reap
    if ((sig == SIGINT || sig == SIGTERM) && !sentTerm) {
      result.exitCode = 128 + sig;
      result.failedRank = -1;
      result.message = std::string("interrupted by ") + strsignal(sig) + "; stopping every rank";
      failing = sentTerm = true;
      killAt = DeadlineIn(5);
      terminateAll();
    }
  }
  (void)sigprocmask(SIG_SETMASK, &oldMask, nullptr);
  result.rankErrors.assign(std::size_t(nranks), std::string());
  if (slots != nullptr) {  // every rank has been reaped: nothing writes the page any more
    for (int r = 0; r < nranks; ++r) {
      const char* slot = static_cast<const char*>(slots) + std::size_t(r) * kRankErrorBytes;
      result.rankErrors[std::size_t(r)].assign(slot, strnlen(slot, kRankErrorBytes - 1));
    }
    ::munmap(slots, slotBytes);
  }
  return result;
}

}  // namespace railyard::perf
