// TCP receiving side: announces posted buffers to the sender (clear-to-send on the
// control socket) and lets helper threads place arriving chunks straight into
// them after checking each one against the posted buffer and its registration.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "proxy/comm.h"
#include "proxy/protocol/recv_table.h"
#include "proxy/tcp/tcp_connection.h"
#include "proxy/tcp/tcp_options.h"

namespace railyard::proxy {

/// RecvComm over TCP. Irecv/Test/Close come from one thread at a time; helper
/// threads read the data sockets.
class TcpRecvComm final : public RecvComm {
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
  /// Reads chunks from `sockets` (indices into conn_.data) until stopped or broken.
  void ReaderLoop(std::vector<int> sockets);
  /// Reads and places one chunk from data socket `i`. *eof on a clean close.
  Status ReadChunk(int i, bool* eof);
  /// Sends queued clear-to-send bytes without blocking.
  Status FlushControl();
  void Touch() { lastProgressNs_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed); }

  TcpConnection conn_;
  TcpOptions options_;
  RecvTable table_;
  std::vector<std::thread> readers_;
  std::atomic<bool> stop_{false};
  std::atomic<int> cleanEofs_{0};
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
