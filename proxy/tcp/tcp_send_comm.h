// TCP sending side: receives clear-to-send records on the control socket and
// writes each message as chunks into the receiver's posted buffer, striped over
// the data sockets with non-blocking writes, by the calling thread while it keeps
// calling isend/test and by helper threads when it does not (tcp_progress_gate.h).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "proxy/comm.h"
#include "proxy/protocol/cts_matcher.h"
#include "proxy/tcp/tcp_chunk_writer.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_options.h"
#include "proxy/tcp/tcp_progress_gate.h"
#include "proxy/tcp/tcp_progress_registry.h"

namespace railyard::proxy {

/// SendComm over TCP. Isend/Test/Close are called by one thread at a time (NCCL's
/// progress thread; Close from the service thread after it stops). The data
/// sockets are split into groups, one per helper thread; a group's writers are
/// only touched under its mutex, by its helper or by the caller (try_lock in test).
class TcpSendComm final : public SendComm, public CallerDriven {
 public:
  /// Sends allowed in flight: NCCL_NET_MAX_REQUESTS × maxRecvs (nccl-net-abi.md §2.5
  /// "Request budget").
  static constexpr int kMaxRequests = 32 * kMaxRecvs;

  TcpSendComm(TcpConnection conn, const TcpOptions& options);
  ~TcpSendComm() override;

  Status Isend(const void* data, size_t size, int tag, MemoryRegion* mr,
               Request** request) override;
  Status Test(Request* request, int* done, int* sizes) override;
  void Close() override;

 private:
  struct SendRequest : Request {
    bool inUse = false;
    uint64_t size = 0;
    int tag = 0;
    uint64_t seq = 0;
    uint32_t slot = 0;
    int nchunks = 0;
    std::atomic<int> chunksDone{0};
    Clock::time_point started{};
  };
  /// The data sockets one helper thread serves, and their queued chunks.
  struct Group {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    std::vector<int> sockets;  ///< indices into conn_.data / writers_
    size_t queued = 0;         ///< chunks queued on this group's sockets
    bool sleeping = false;     ///< the helper waits for chunks (Enqueue must wake it)
  };

  /// Reads whatever the control socket holds (CTS, reject, EOF) without blocking.
  Status PollControl();
  void HelperLoop(Group* g);
  /// Writes what group `g`'s sockets accept now (non-blocking); g->mu held.
  /// A broken socket poisons the comm and drops every queued chunk.
  bool ProgressLocked(Group& g);
  /// CallerDriven: one pass over every group whose lock is free (marks the caller
  /// active). True when bytes moved.
  bool CallerPass() override;
  Status TimedOut(const char* what, uint64_t seq, int tag, Clock::time_point since) const;
  void Touch() { lastProgressNs_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }
  Clock::time_point LastProgress() const {
    return Clock::time_point(Clock::duration(lastProgressNs_.load(std::memory_order_relaxed)));
  }

  TcpConnection conn_;
  TcpOptions options_;
  CtsMatcher matcher_;
  std::array<SendRequest, kMaxRequests> requests_;
  std::vector<int> free_;  ///< indices of free requests
  std::vector<ChunkWriter> writers_;  ///< one per data socket
  std::vector<std::unique_ptr<Group>> groups_;
  ProgressGate gate_;
  std::atomic<bool> stop_{false};
  bool closed_ = false;
  Poison poison_;
  std::atomic<int64_t> lastProgressNs_{0};
  /// Per data socket: since when it has had bytes to write without writing any
  /// (steady clock ns), 0 when it has nothing queued.
  std::unique_ptr<std::atomic<int64_t>[]> busySinceNs_;
  /// "rail X" for the data socket stalled the longest, or "" (for timeout errors).
  std::string StalledRail() const;
  std::string RailOf(int socket) const;
  std::vector<char> controlIn_;  ///< partial control record
  size_t nextSocket_ = 0;
  bool waiting_ = false;             ///< an isend is waiting for a clear-to-send
  Clock::time_point waitingSince_{};
};

}  // namespace railyard::proxy
