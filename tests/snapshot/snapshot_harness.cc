#include "tests/snapshot/snapshot_harness.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tests/snapshot/snapshot_transport.h"

namespace railyard::storage::snapshot::testing {

PeerProcess::~PeerProcess() { Signal(SIGKILL); }

bool PeerProcess::Start(const std::vector<std::string>& argv, std::string* why, int* exitCode) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) {
    *why = "pipe failed";
    return false;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  stdinFd_ = in[1];
  stdoutFd_ = out[0];
  std::string got;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{stdoutFd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[256];
    const ssize_t n = ::read(stdoutFd_, buf, sizeof buf);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
    for (const char* tag : {"snapshot-port ", "port "}) {
      const size_t at = got.find(tag);
      if (at != std::string::npos && got.find('\n', at) != std::string::npos) {
        port_ = static_cast<uint16_t>(std::atoi(got.c_str() + at + std::strlen(tag)));
        return port_ != 0;
      }
    }
  }
  int st = 0;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &st, 0);
  if (exitCode != nullptr) *exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  pid_ = -1;
  *why = "the peer printed no port (output: '" + got + "')";
  return false;
}

void PeerProcess::Signal(int sig) {
  if (pid_ <= 0) return;
  ::kill(pid_, sig);
  if (sig == SIGSTOP) {
    // kill() only queues the stop: wait until the peer is stopped, so a request sent
    // next cannot be served first (under load it was: a test saw its call succeed).
    int st = 0;
    if (::waitpid(pid_, &st, WUNTRACED) == pid_ && WIFSTOPPED(st)) return;
    sig = SIGKILL;  // it exited instead: reaped, and forgotten below
  }
  if (sig == SIGKILL || sig == SIGTERM) {
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
    if (stdinFd_ >= 0) ::close(stdinFd_);
    if (stdoutFd_ >= 0) ::close(stdoutFd_);
    stdinFd_ = stdoutFd_ = -1;
  }
}

ClientSide::~ClientSide() {
  client.reset();
  cache.reset();
  worker.reset();
  domain.reset();
}

Status ClientSide::Connect(const ClientOptions& options, int fabricTimeoutMs) {
  if (!domain) {
    RY_RETURN_IF_ERROR(MakeTestDomain(Side::kClient, fabricTimeoutMs, &domain));
    RY_RETURN_IF_ERROR(domain->CreateWorker(&worker));
    cache = std::make_unique<fabric::RegistrationCache>(*domain);
  }
  client.reset();
  return SnapshotClient::Connect(*cache, *worker, options, &client);
}

std::string PeerBinary() { return RAILYARD_SNAPSHOT_PEER; }

void Fill(uint8_t* p, size_t n, uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (size_t i = 0; i < n; i += 8) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(p + i, &x, std::min<size_t>(8, n - i));
  }
}

int64_t Mismatch(const uint8_t* p, size_t n, uint64_t seed) {
  std::vector<uint8_t> want(n);
  Fill(want.data(), n, seed);
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != want[i]) return static_cast<int64_t>(i);
  }
  return -1;
}

std::string MakeTempDir() {
  const char* t = std::getenv("TMPDIR");
  std::string tmpl = std::string(t != nullptr && *t ? t : "/tmp") + "/railyard-snapshot-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

void RemoveTree(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace railyard::storage::snapshot::testing
