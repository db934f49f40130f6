// TCP receiving side: announces posted buffers to the sender (clear-to-send on the
// control socket) and places arriving chunks straight into them after checking
// each one against the posted buffer and its registration. The sockets are read
// without blocking by the calling thread while it keeps calling irecv/test, and
// by helper threads when it does not (tcp_progress_gate.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "proxy/comm.h"
#include "proxy/protocol/recv_table.h"
#include "proxy/tcp/tcp_chunk_reader.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_options.h"
#include "proxy/tcp/tcp_progress_gate.h"
#include "proxy/tcp/tcp_progress_registry.h"

namespace railyard::proxy {

/// RecvComm over TCP. Irecv/Test/Close come from one thread at a time. The data
/// sockets are split into groups, one per helper thread; a group's readers are
/// only touched under its mutex, by its helper or by the caller (try_lock in test).
class TcpRecvComm final : public RecvComm, public CallerDriven {
 public:
  /// How long a pending receive may wait for data still in flight after the peer
  /// closed a data socket (ms).
  static constexpr int kEofGraceMs = 200;

  TcpRecvComm(TcpConnection conn, const TcpOptions& options, const MrCache* cache);
  ~TcpRecvComm() override;

  Status Irecv(int n, void** data, const size_t* sizes, const int* tags, MemoryRegion** mrs,
               Request** request) override;
  Status Test(Request* request, int* done, int* sizes) override;
  void Close() override;

 private:
  /// The data sockets one helper thread serves.
  struct Group {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int> sockets;  ///< indices into conn_.data / readers_
    bool dead = false;         ///< a socket failed: the group reads no more
  };
  void HelperLoop(Group* g);
  /// Reads what group `g`'s sockets hold now (non-blocking); g->mu held. A
  /// failure poisons the comm; a clean close is counted towards the EOF rules.
  bool ProgressLocked(Group& g);
  /// CallerDriven: one pass over every group whose lock is free (marks the caller
  /// active). True when bytes moved.
  bool CallerPass() override;
  /// Open sockets of `g`; g->mu held.
  size_t OpenSockets(const Group& g) const;
  /// Sends queued clear-to-send bytes without blocking.
  Status FlushControl();
  void Touch() { lastProgressNs_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }

  TcpConnection conn_;
  TcpOptions options_;
  RecvTable table_;
  std::vector<ChunkReader> readers_;  ///< one per data socket
  std::vector<std::unique_ptr<Group>> groups_;
  ProgressGate gate_;
  std::atomic<bool> stop_{false};
  std::atomic<int> cleanEofs_{0};
  /// The poison was logged at INFO because nothing made it matter yet (the peer closed, or a
  /// socket broke, at a job's normal end); the first irecv/test that runs into it logs it
  /// at WARN (then it is a fault: a sender that died, a relay that went away).
  std::atomic<bool> warnPending_{false};
  /// Records `s` as the poison: at WARN when `matters`, else at INFO with the WARN deferred
  /// to the first irecv/test that returns it (PoisonedStatus).
  void PoisonQuietly(const Status& s, bool matters);
  /// The poison, logging the deferred WARN once.
  Status PoisonedStatus();
  /// When the first data socket closed cleanly (steady clock ns), 0 if none: a
  /// peer closing its comm closes every socket at once, so a receive still
  /// pending a moment later will never complete (a relay died, or the peer quit).
  std::atomic<int64_t> firstEofNs_{0};
  bool closed_ = false;
  Poison poison_;
  std::atomic<int64_t> lastProgressNs_{0};
  std::string controlOut_;  ///< clear-to-send bytes not yet accepted by the socket
};

}  // namespace railyard::proxy
