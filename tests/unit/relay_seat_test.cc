// RelaySeat: one holder per seat, a daemon takes the seat (and its listening socket,
// accept queue included) from a rank, a second daemon is refused with the holder's
// pid, a leaving holder hands over to a standby, and a standby claims the seat when
// its holder is killed.
#include "proxy/relay/relay_seat.h"
#include "tests/common/free_port.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace railyard::proxy {
namespace {

using Role = RelaySeat::Role;
using State = RelaySeat::State;
using Change = RelaySeat::Change;

std::string UniqueKey() {
  static int n = 0;
  return "test:" + std::to_string(::getpid()) + ":" + std::to_string(n++);
}

/// A free TCP port on 127.0.0.1 (bound once, then released).
uint16_t FreePort() {
  const uint16_t port = test_support::FreePort();
  EXPECT_NE(port, 0) << "no free port on 127.0.0.1";
  return port;
}

/// Opens one exclusive listener on 127.0.0.1:port (no SO_REUSEPORT), as the relay does.
RelaySeat::OpenFn Listener(uint16_t port, std::atomic<int>* opened = nullptr) {
  return [port, opened](std::vector<Fd>* res) -> Status {
    Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return SystemError("bind: " + ErrnoText(errno));
    if (::listen(s.get(), 16) != 0) return SystemError("listen");
    if (opened != nullptr) opened->fetch_add(1);
    res->push_back(std::move(s));
    return Status::Ok();
  };
}

uint16_t PortOf(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}

/// Serves a seat on its own thread (the seat's one thread) until destroyed; records
/// the last change.
class Server {
 public:
  explicit Server(RelaySeat* seat) : seat_(seat), thread_([this] { Loop(); }) {}
  ~Server() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  Change last() const { return last_.load(); }

 private:
  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds;
      for (int fd : seat_->WatchFds()) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 20) <= 0) continue;
      for (const pollfd& p : fds) {
        if (p.revents == 0) continue;
        Change c = Change::kNone;
        (void)seat_->OnReadable(p.fd, &c);
        if (c != Change::kNone) last_ = c;
      }
    }
  }
  RelaySeat* seat_;
  std::atomic<bool> stop_{false};
  std::atomic<Change> last_{Change::kNone};
  std::thread thread_;
};

/// Polls `seat`'s descriptors until a change arrives or 5 s pass.
Change WaitForChange(RelaySeat* seat) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < until) {
    std::vector<pollfd> fds;
    for (int fd : seat->WatchFds()) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    for (const pollfd& p : fds) {
      if (p.revents == 0) continue;
      Change c = Change::kNone;
      EXPECT_TRUE(seat->OnReadable(p.fd, &c).ok());
      if (c != Change::kNone) return c;
    }
  }
  return Change::kNone;
}

TEST(RelaySeat, AFreeSeatIsHeldAndItsResourcesOpened) {
  std::atomic<int> opened{0};
  const uint16_t port = FreePort();
  std::unique_ptr<RelaySeat> s;
  ASSERT_TRUE(RelaySeat::Claim(UniqueKey(), Role::kRank, Listener(port, &opened), &s).ok());
  EXPECT_EQ(s->state(), State::kHolding);
  ASSERT_EQ(s->Resources().size(), 1u);
  EXPECT_EQ(PortOf(s->Resources()[0].get()), port);
  EXPECT_EQ(opened.load(), 1);
  EXPECT_EQ(s->HolderText(), "a rank process (pid " + std::to_string(::getpid()) + ")");
}

TEST(RelaySeat, ASecondDaemonIsRefusedNamingTheFirst) {
  const std::string key = UniqueKey();
  const uint16_t port = FreePort();
  std::unique_ptr<RelaySeat> first, second;
  ASSERT_TRUE(RelaySeat::Claim(key, Role::kDaemon, Listener(port), &first).ok());
  Server serve(first.get());
  std::atomic<int> opened{0};
  Status s = RelaySeat::Claim(key, Role::kDaemon, Listener(port, &opened), &second);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kInvalidUsage);
  EXPECT_NE(s.message().find("another railyardd (pid " + std::to_string(::getpid()) + ") already runs on this host"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(opened.load(), 0);  // nothing was bound for the refused one
  serve.Stop();
  EXPECT_EQ(first->state(), State::kHolding);
}

TEST(RelaySeat, ARankStandsByWhileADaemonHolds) {
  const std::string key = UniqueKey();
  const uint16_t port = FreePort();
  std::unique_ptr<RelaySeat> daemon, rank;
  ASSERT_TRUE(RelaySeat::Claim(key, Role::kDaemon, Listener(port), &daemon).ok());
  Server serve(daemon.get());
  std::atomic<int> opened{0};
  ASSERT_TRUE(RelaySeat::Claim(key, Role::kRank, Listener(port, &opened), &rank).ok());
  EXPECT_EQ(rank->state(), State::kStandby);
  EXPECT_TRUE(rank->Resources().empty());
  EXPECT_EQ(opened.load(), 0);
  EXPECT_EQ(rank->HolderText(), "railyardd (pid " + std::to_string(::getpid()) + ")");
}

TEST(RelaySeat, ADaemonTakesTheListenerAndItsAcceptQueueFromARank) {
  const std::string key = UniqueKey();
  const uint16_t port = FreePort();
  std::unique_ptr<RelaySeat> rank, daemon;
  ASSERT_TRUE(RelaySeat::Claim(key, Role::kRank, Listener(port), &rank).ok());
  ASSERT_EQ(rank->state(), State::kHolding);
  // A relayed socket arrives before the daemon starts: it waits in the accept queue.
  Fd client(::socket(AF_INET, SOCK_STREAM, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(client.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);

  auto serveRank = std::make_unique<Server>(rank.get());
  std::atomic<int> opened{0};
  ASSERT_TRUE(RelaySeat::Claim(key, Role::kDaemon, Listener(port, &opened), &daemon).ok());
  Server serveDaemon(daemon.get());  // answers the rank, which now stands by with the daemon
  EXPECT_EQ(daemon->state(), State::kHolding);
  EXPECT_EQ(opened.load(), 0);  // the daemon bound nothing: the rank's listener came over
  ASSERT_EQ(daemon->Resources().size(), 1u);
  EXPECT_EQ(PortOf(daemon->Resources()[0].get()), port);
  Fd accepted(::accept(daemon->Resources()[0].get(), nullptr, nullptr));
  EXPECT_TRUE(accepted.valid()) << "the connection queued before the handover is the daemon's";
  // The rank gave the seat away and stands by with the daemon.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (serveRank->last() != Change::kGivenAway && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // polling a flag with a bound
  }
  EXPECT_EQ(serveRank->last(), Change::kGivenAway);
  serveRank->Stop();
  EXPECT_EQ(rank->state(), State::kStandby);
  EXPECT_TRUE(rank->Resources().empty());
  EXPECT_EQ(rank->HolderText(), "railyardd (pid " + std::to_string(::getpid()) + ")");
}

TEST(RelaySeat, ALeavingRankHandsTheSeatToAStandby) {
  const std::string key = UniqueKey();
  const uint16_t port = FreePort();
  std::unique_ptr<RelaySeat> a, b;
  ASSERT_TRUE(RelaySeat::Claim(key, Role::kRank, Listener(port), &a).ok());
  {
    Server serve(a.get());
    ASSERT_TRUE(RelaySeat::Claim(key, Role::kRank, Listener(port), &b).ok());
    ASSERT_EQ(b->state(), State::kStandby);
  }  // joining the server finishes the OnReadable that registered b
  EXPECT_TRUE(a->HandOff());
  EXPECT_EQ(WaitForChange(b.get()), Change::kTaken);
  EXPECT_EQ(b->state(), State::kHolding);
  ASSERT_EQ(b->Resources().size(), 1u);
  EXPECT_EQ(PortOf(b->Resources()[0].get()), port);
}

TEST(RelaySeat, AStandbyClaimsTheSeatWhenItsHolderIsKilled) {
  const std::string key = UniqueKey();
  const uint16_t port = FreePort();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::unique_ptr<RelaySeat> s;
    if (!RelaySeat::Claim(key, Role::kRank, Listener(port), &s).ok()) _exit(3);
    char c = 1;
    (void)!::write(ready[1], &c, 1);
    for (;;) {  // serve until killed
      std::vector<pollfd> fds;
      for (int fd : s->WatchFds()) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), 100) <= 0) continue;
      for (const pollfd& p : fds) {
        Change ch;
        if (p.revents != 0) (void)s->OnReadable(p.fd, &ch);
      }
    }
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  std::atomic<int> opened{0};
  std::unique_ptr<RelaySeat> standby;
  ASSERT_TRUE(RelaySeat::Claim(key, Role::kRank, Listener(port, &opened), &standby).ok());
  ASSERT_EQ(standby->state(), State::kStandby);
  EXPECT_EQ(standby->HolderText(), "a rank process (pid " + std::to_string(child) + ")");
  ::kill(child, SIGKILL);
  int st = 0;
  ::waitpid(child, &st, 0);
  EXPECT_EQ(WaitForChange(standby.get()), Change::kTaken);
  EXPECT_EQ(standby->state(), State::kHolding);
  EXPECT_EQ(opened.load(), 1);  // the port was bound afresh here
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace railyard::proxy
