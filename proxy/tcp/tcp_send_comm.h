// TCP sending side: receives clear-to-send records on the control socket and
// writes each message as chunks into the receiver's posted buffer, striped over
// the data sockets by helper threads.
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "proxy/comm.h"
#include "proxy/protocol/cts_matcher.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_options.h"

namespace railyard::proxy {

/// SendComm over TCP. Isend/Test/Close are called by one thread at a time (NCCL's
/// progress thread; Close from the service thread after it stops); helper threads
/// only touch task queues, completion counters, the poison and the progress clock.
class TcpSendComm final : public SendComm {
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
  struct Task {
    SendRequest* req;
    ChunkHeader header;
    const char* payload;
    int socket;  ///< index into conn_.data
  };
  struct Worker {
    std::thread thread;
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Task> tasks;
  };

  /// Reads whatever the control socket holds (CTS, reject, EOF) without blocking.
  Status PollControl();
  void WorkerLoop(Worker* w);
  void Enqueue(const Task& t);
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
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> stop_{false};
  bool closed_ = false;
  Poison poison_;
  std::atomic<int64_t> lastProgressNs_{0};
  /// Per data socket: when its current send began (steady clock ns), 0 when idle.
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
