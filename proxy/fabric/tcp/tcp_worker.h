// The TCP transport's Worker: listens on every rail, groups peers' sockets into
// connections (TcpTarget), drives its own Endpoints (TcpEndpoint) and collects the
// events. Explicit progress only: it starts no thread.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "env/log_budget.h"
#include "proxy/fabric/accept_sources.h"
#include "proxy/fabric/tcp/tcp_domain.h"
#include "proxy/fabric/tcp/tcp_frame.h"
#include "proxy/fabric/worker.h"
#include "proxy/socket.h"

namespace railyard::fabric::tcp {

struct SpliceRoute;

class TcpEndpoint;
class TcpTarget;

using Clock = std::chrono::steady_clock;

/// See file comment. Its Endpoints must be destroyed before it.
class TcpWorker : public Worker {
 public:
  /// Opens one listening socket per rail of `domain` (the rail's address, an
  /// ephemeral port). SystemError naming the rail when bind or listen fails.
  static Status Create(TcpDomain* domain, std::unique_ptr<Worker>* out);
  ~TcpWorker() override;

  std::vector<uint8_t> Address() const override { return address_.Pack(); }
  Status Connect(std::span<const uint8_t> peerAddress, std::unique_ptr<Endpoint>* out) override;
  /// Connect through a relay that splices sockets (SpliceRoute, tcp_endpoint.h): the
  /// same Endpoint and frames; errors as Connect's, and InvalidArgument for a plan
  /// that does not fit the address.
  Status ConnectSpliced(std::span<const uint8_t> peerAddress, const SpliceRoute& splice,
                        std::unique_ptr<Endpoint>* out);
  size_t Progress(std::vector<Event>* events) override;
  WorkerStats stats() const override;
  /// The epoll set of every watched socket and listener (-1 when a watch failed).
  int WaitFd() const override { return watchFailed_ ? -1 : epoll_.get(); }
  /// No pending hello, no queued event, every Endpoint and target Quiet().
  bool Quiet() const override;

  // --- for TcpEndpoint and TcpTarget --------------------------------------------------
  TcpDomain& domain() { return *domain_; }
  const TcpOptions& options() const { return domain_->options(); }
  uint64_t id() const { return address_.workerId; }
  /// Queues an event for the next Progress.
  void Emit(Event e) { events_.push_back(std::move(e)); }
  WorkerStats& counters() { return stats_; }
  /// An Endpoint going away.
  void Detach(TcpEndpoint* ep);
  /// Watches socket `fd` for input, EOF and errors: Progress pumps a socket's receive
  /// side only when its epoll says so (one epoll_wait per Progress instead of a
  /// recv() on every idle socket). A closed fd leaves the set by itself.
  void Watch(int fd);
  /// What a peer-caused WARN is about: each kind has its own budget, so a peer forging
  /// refused frames cannot spend the one that real failures are logged from (review).
  enum class PeerWarn { kRefusal, kFailure };
  /// True when a peer-caused WARN of `kind` may be logged now: at most 20 of each kind
  /// per 10 s per Worker (hostile-peer probe: 3000 forged Writes wrote 3000 WARNs in a
  /// second); the rest are counted and said in one WARN per window.
  bool MayWarnOfPeer(PeerWarn kind) {
    log::LogBudget& budget = kind == PeerWarn::kRefusal ? refusalWarns_ : failureWarns_;
    if (budget.Take(log::LogBudget::Clock::now())) return true;
    peerWarnsSuppressed_ = true;
    return false;
  }
  /// True when `fd` had input, EOF or an error pending at the start of this Progress.
  bool Readable(int fd) const {
    return allReadable_ || (fd >= 0 && static_cast<size_t>(fd) < ready_.size() && ready_[static_cast<size_t>(fd)] != 0);
  }

 private:
  explicit TcpWorker(TcpDomain* domain);
  void AcceptNew();
  /// Fills ready_ from one non-blocking epoll_wait.
  void PollReadiness();
  void ReadHellos();
  /// The target table is full (TcpOptions::maxPeerConnections) and a new connection's
  /// hello came from `source`: makes room by closing the oldest idle connection (no op
  /// under way) of the source holding the most connections (busy or idle; a dead one
  /// not yet reaped goes first), unless `source` holds as many, or that source has
  /// none idle. True when there is room now.
  bool MakeRoomForConnection(uint32_t source, int rail);

  /// A socket accepted and waiting for its hello.
  struct Pending {
    proxy::Fd fd;
    int rail = 0;
    uint32_t source = 0;  ///< the peer's IPv4 address (network order; 0 when unknown)
    uint8_t hello[sizeof(FrameHeader)] = {};
    size_t got = 0;
    Clock::time_point since;
  };

  TcpDomain* domain_;
  WorkerAddress address_;
  std::vector<proxy::Fd> listeners_;  ///< one per rail
  proxy::Fd epoll_;                   ///< readiness of listeners and every frame socket
  std::vector<uint8_t> ready_;        ///< by fd: readable at this Progress
  std::vector<int> readyList_;        ///< fds set in ready_
  bool allReadable_ = false;          ///< epoll returned a full batch: try every socket
  bool watchFailed_ = false;          ///< some socket could not be watched: try every socket
  std::vector<Pending> pending_;
  std::map<std::pair<uint64_t, uint64_t>, std::unique_ptr<TcpTarget>> targets_;  ///< (peer worker, connection)
  std::vector<TcpEndpoint*> endpoints_;
  std::vector<Event> events_;
  WorkerStats stats_;
  uint64_t nextConnection_ = 1;
  AcceptSources acceptOnlyFrom_;  ///< TcpOptions::acceptOnlyFrom, parsed
  uint64_t offSource_ = 0;        ///< sockets closed at accept for their source
  std::vector<uint32_t> waiting_;  ///< AcceptNew's scratch: the sources of pending_, in order
  log::LogBudget refusalWarns_{20, std::chrono::seconds(10)};  ///< MayWarnOfPeer(kRefusal)
  log::LogBudget failureWarns_{20, std::chrono::seconds(10)};  ///< MayWarnOfPeer(kFailure)
  bool peerWarnsSuppressed_ = false;  ///< some were: Progress reports them once their window ends
  uint64_t acceptErrors_ = 0;      ///< accept() failures other than EAGAIN (EMFILE, ...)
  uint64_t refusedAtAccept_ = 0;  ///< sockets closed at accept or evicted: the hello table was full
  uint64_t refusedHellos_ = 0;    ///< sockets closed for their hello, or for sending none in time
  uint64_t closedForRoom_ = 0;    ///< idle connections closed to make room for another source's
};

}  // namespace railyard::fabric::tcp
