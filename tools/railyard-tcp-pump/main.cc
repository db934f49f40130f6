// railyard-tcp-pump: the raw TCP baseline for docs/benchmarks.md.
//
// N local processes connected in the same pattern railyard-perf uses (oneway:
// rank 0 → rank 1; pair: 0 ↔ 1; ring: r → r+1), each connection made of S TCP
// streams. Every iteration the receiver first sends one "go" byte back to its
// sender (the equivalent of the plugin's clear-to-send), then the message is
// split evenly over the streams and pumped with non-blocking send/recv in a busy
// polling loop: no plugin, no helper threads, no copies beyond the kernel's.
// This is the practical limit of a loopback lane on the same CPUs.
//
// Timing matches railyard-perf -c 0: the timed iterations run back to back (each
// with its go byte, as each railyard iteration has its clear-to-send) and each
// rank divides their total time by their number; the slowest rank counts.
//
// Output: one JSON object per line per size on stdout:
//   {"size": bytes, "streams": S, "pattern": "...", "ranks": N,
//    "time_us": mean µs per iteration (max over ranks), "algbw_gbps": size/time_us/1e3,
//    "median_us": median single iteration (max over ranks), for reference}
//
// Exit status: 0 done, 1 a socket or a rank process failed, 2 usage error.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <optional>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/common/cli_parse.h"

namespace {

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "railyard-tcp-pump: %s: %s\n", what.c_str(), std::strerror(errno));
  _exit(1);
}

int Listen(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("bind");
  if (listen(fd, 256) != 0) Die("listen");
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int Connect(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) Die("connect");
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

void ReadAll(int fd, void* p, size_t n) {
  auto* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = recv(fd, c, n, 0);
    if (r <= 0) Die("recv");
    c += r;
    n -= static_cast<size_t>(r);
  }
}

/// Pumps `bytes` out over `out` and in over `in` (either may be empty) with
/// non-blocking calls in one busy loop.
void Pump(const std::vector<int>& out, const char* src, const std::vector<int>& in, char* dst,
          size_t bytes) {
  const size_t nout = out.size(), nin = in.size();
  std::vector<size_t> sent(nout, 0), got(nin, 0);
  auto share = [&](size_t i, size_t n) { return bytes / n + (i < bytes % n ? 1 : 0); };
  auto offset = [&](size_t i, size_t n) { return i * (bytes / n) + std::min(i, bytes % n); };
  size_t pending = nout + nin;
  for (size_t i = 0; i < nout; ++i) pending -= share(i, nout) == 0;
  for (size_t i = 0; i < nin; ++i) pending -= share(i, nin) == 0;
  while (pending > 0) {
    for (size_t i = 0; i < nout; ++i) {
      const size_t want = share(i, nout);
      if (sent[i] == want) continue;
      ssize_t r = send(out[i], src + offset(i, nout) + sent[i], want - sent[i], MSG_DONTWAIT | MSG_NOSIGNAL);
      if (r < 0 && errno != EAGAIN) Die("send");
      if (r > 0 && (sent[i] += static_cast<size_t>(r)) == want) --pending;
    }
    for (size_t i = 0; i < nin; ++i) {
      const size_t want = share(i, nin);
      if (got[i] == want) continue;
      ssize_t r = recv(in[i], dst + offset(i, nin) + got[i], want - got[i], MSG_DONTWAIT);
      if (r == 0) Die("peer closed");
      if (r < 0 && errno != EAGAIN) Die("recv");
      if (r > 0 && (got[i] += static_cast<size_t>(r)) == want) --pending;
    }
  }
}

/// Largest message (and buffer per rank and direction), bytes: 1 GiB, as railyard-perf's -e.
constexpr size_t kMaxPumpBytes = size_t{1} << 30;

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Raw TCP baseline: polling pump over loopback (no plugin)"};
  int nranks = 2, streams = 4, iters = 20, warmup = 5;
  std::string pattern = "pair";
  size_t minBytes = 64 << 10, maxBytes = 256 << 20;
  double factor = 2;
  app.add_option("-n,--iters", iters, "timed iterations per size")->capture_default_str()->check(railyard::tools::InRange(1, 1 << 24));
  app.add_option("-w,--warmup", warmup, "untimed iterations per size")->capture_default_str()->check(railyard::tools::InRange(0, 1 << 24));
  app.add_option("-s,--streams", streams, "TCP streams per connection")->capture_default_str()->check(railyard::tools::InRange(1, 64));
  app.add_option("--np", nranks, "processes (-p ring only; oneway and pair use 2)")->capture_default_str()->check(railyard::tools::InRange(2, 16));
  app.add_option("-p,--pattern", pattern, "oneway | pair | ring")->capture_default_str()->check(CLI::IsMember({"oneway", "pair", "ring"}));
  app.add_option("-b,--minbytes", minBytes, "smallest message (bytes; K/M/G suffixes are powers of 1024)")
      ->capture_default_str()->transform(CLI::AsSizeValue(false));
  app.add_option("-e,--maxbytes", maxBytes, "largest message (bytes; K/M/G suffixes are powers of 1024), at most 1G")
      ->capture_default_str()->transform(CLI::AsSizeValue(false));
  app.add_option("-f,--stepfactor", factor, "size multiplier")->capture_default_str()->check(railyard::tools::InRange(1.01, 1024.0));
  app.footer("Exit status: 0 done, 1 a socket or process failed, 2 usage error.");
  if (std::optional<int> exitNow = railyard::tools::ParseCommandLine(app, argc, argv, "railyard-tcp-pump")) {
    return *exitNow;
  }
  // Usage errors the option checks cannot see (exit 2, as a bad flag): an empty size range
  // would print nothing and exit 0, a size above 1 GiB (CLI11 reads "-5" as a huge size_t)
  // would make every rank die in its buffer allocation, and --np means nothing outside ring.
  auto usage = [](const std::string& what) {
    std::fprintf(stderr, "railyard-tcp-pump: %s\nRun with --help for more information.\n", what.c_str());
    return railyard::tools::kUsageExit;
  };
  if (maxBytes > kMaxPumpBytes) {
    return usage("--maxbytes " + std::to_string(maxBytes) + " is above the 1G limit (each rank allocates it twice)");
  }
  if (minBytes > maxBytes) {
    return usage("--minbytes " + std::to_string(minBytes) + " is larger than --maxbytes " + std::to_string(maxBytes));
  }
  if (pattern != "ring" && app.count("--np") > 0 && nranks != 2) {
    return usage("--np " + std::to_string(nranks) + ": -p " + pattern + " always runs 2 processes (--np is for -p ring)");
  }
  if (pattern != "ring") nranks = 2;

  // Rank r listens for its incoming connection before anyone forks.
  std::vector<int> lfd(static_cast<size_t>(nranks));
  std::vector<uint16_t> port(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) lfd[static_cast<size_t>(r)] = Listen(&port[static_cast<size_t>(r)]);
  int results[2];
  if (pipe(results) != 0) Die("pipe");

  std::vector<pid_t> kids;
  for (int rank = 0; rank < nranks; ++rank) {
    pid_t pid = fork();
    if (pid < 0) Die("fork");
    if (pid > 0) {
      kids.push_back(pid);
      continue;
    }
    const int next = (rank + 1) % nranks;
    const bool sends = pattern != "oneway" || rank == 0;
    const bool recvs = pattern != "oneway" || rank == 1;
    std::vector<int> out, in;
    if (sends) {
      for (int s = 0; s < streams; ++s) out.push_back(Connect(port[static_cast<size_t>(next)]));
    }
    if (recvs) {
      for (int s = 0; s < streams; ++s) {
        int fd = accept(lfd[static_cast<size_t>(rank)], nullptr, nullptr);
        if (fd < 0) Die("accept");
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        in.push_back(fd);
      }
    }
    std::vector<char> src(maxBytes, static_cast<char>(rank + 1)), dst(maxBytes);
    for (size_t size = minBytes; size <= maxBytes;
         size = std::max(size + 1, static_cast<size_t>(static_cast<double>(size) * factor))) {
      std::vector<double> us;
      auto start = std::chrono::steady_clock::now();
      for (int it = 0; it < warmup + iters; ++it) {
        if (it == warmup) start = std::chrono::steady_clock::now();
        char go = 1;
        const auto t0 = std::chrono::steady_clock::now();
        // Clear-to-send: the receiver announces it is ready, the sender waits for it.
        if (recvs && send(in[0], &go, 1, MSG_NOSIGNAL) != 1) Die("send go");
        if (sends) ReadAll(out[0], &go, 1);
        Pump(out, src.data(), in, dst.data(), size);
        const auto t1 = std::chrono::steady_clock::now();
        if (it >= warmup) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      const double mean =
          std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters;
      std::sort(us.begin(), us.end());
      const double both[2] = {mean, us[us.size() / 2]};
      if (write(results[1], both, sizeof both) != sizeof both) Die("write");
    }
    _exit(0);
  }
  close(results[1]);
  for (size_t size = minBytes; size <= maxBytes;
       size = std::max(size + 1, static_cast<size_t>(static_cast<double>(size) * factor))) {
    double worst = 0, worstMedian = 0;
    for (int r = 0; r < nranks; ++r) {
      double t[2] = {0, 0};
      if (read(results[0], t, sizeof t) != sizeof t) Die("read results");
      worst = std::max(worst, t[0]);
      worstMedian = std::max(worstMedian, t[1]);
    }
    std::printf("{\"size\": %zu, \"streams\": %d, \"pattern\": \"%s\", \"ranks\": %d, "
                "\"time_us\": %.2f, \"algbw_gbps\": %.4f, \"median_us\": %.2f}\n",
                size, streams, pattern.c_str(), nranks, worst, static_cast<double>(size) / worst / 1e3,
                worstMedian);
    std::fflush(stdout);
  }
  int rc = 0;
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) rc = 1;
  }
  return rc;
}
