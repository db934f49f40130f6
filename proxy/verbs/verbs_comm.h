// The verbs transport's send and receive comms: the receiver-posted-buffer
// protocol (proxy/protocol) over RC QPs, as laid out in verbs_layout.h.
// Progress is driven by the caller's isend/irecv/test (NCCL's proxy thread polls
// test), so there is no helper thread; an async-event subscription and the control
// socket's EOF make faults show up promptly.
#pragma once

#include <array>
#include <deque>
#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "proxy/comm.h"
#include "proxy/protocol/cts_matcher.h"
#include "proxy/protocol/recv_table.h"
#include "proxy/socket.h"
#include "proxy/verbs/qp_bundle.h"
#include "proxy/verbs/verbs_layout.h"

namespace railyard::proxy::verbs {

/// Settings of one verbs connection, from the configuration.
struct VerbsOptions {
  int timeoutMs = 30000;   ///< RAILYARD_TIMEOUT_MS: no-progress limit of a request
  bool useInline = true;   ///< RAILYARD_IB_USE_INLINE: records go inline when the QP allows
  std::string device;      ///< the NCCL device name, for messages
  /// This process's rank in the comm's communicator (errors name it; sends note it);
  /// NULL: the process-wide guess (LocalRank).
  std::shared_ptr<RankSource> rank;
};

/// Memory of `bytes` bytes, page-aligned, zeroed, registered in the MR cache on
/// every rail (so peers can RDMA into it). Freed and deregistered on destruction.
class RegisteredBuffer {
 public:
  /// SystemError when allocation or registration fails.
  static Status Create(size_t bytes, std::unique_ptr<RegisteredBuffer>* out);
  ~RegisteredBuffer();
  void* data() const { return data_; }
  MemoryRegion* mr() const { return mr_; }

 private:
  RegisteredBuffer() = default;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  MemoryRegion* mr_ = nullptr;
};

/// What both comms share: QPs, the peer's record set, the control socket, faults.
struct VerbsLink {
  std::unique_ptr<QpBundle> qps;
  QpSet remote;            ///< the peer's validated record set
  Fd control;              ///< the TCP control socket (EOF = the peer went away)
  PeerInfo peer;           ///< device = our rails, e.g. "rxe_h0r0:1+rxe_h0r1:1"
  VerbsOptions options;
};

/// Sending end (the connector).
class VerbsSendComm final : public SendComm {
 public:
  /// `fifo` is the CTS FIFO the receiver writes (kMaxRequests FifoSlots) and
  /// `staging` kRingEntries ChunkHeaders per QP for records sent without inline,
  /// then kHeartbeatSlots words per QP (heartbeat sources).
  VerbsSendComm(VerbsLink link, std::unique_ptr<RegisteredBuffer> fifo,
                std::unique_ptr<RegisteredBuffer> staging);
  ~VerbsSendComm() override;
  Status Isend(const void* data, size_t size, int tag, MemoryRegion* mr, Request** request) override;
  Status Test(Request* request, int* done, int* sizes) override;
  void Close() override;

 private:
  struct SendReq : Request {
    bool used = false;
    uint64_t seq = 0;
    uint32_t slot = 0;
    int tag = 0;
    uint64_t size = 0;
    int parts = 0;
    int partsDone = 0;
    Clock::time_point since{};
  };
  /// One part of a message on one QP, waiting for room in its send queue.
  struct Part {
    SendReq* req = nullptr;
    uint32_t ringIndex = 0;   ///< completion-ring entry (its header is in staging)
    uint64_t local = 0;       ///< first payload byte here
    uint64_t remote = 0;      ///< where it lands on the receiver
    uint64_t len = 0;
    uint32_t lkey = 0;
    uint32_t rkey = 0;
  };
  Status Progress();
  Status PollFifo();
  Status PollCompletions();
  Status Post(SendReq& req, const SendMatch& m, const void* data, MemoryRegion* mr);
  /// Posts the parts queued on QP `qi` while its send queue has room.
  Status Drain(size_t qi);
  /// Posts one part's header and payload WRs (room checked by the caller).
  Status PostPart(size_t qi, const Part& part);
  size_t QpIndex(uint32_t qpn) const;

  VerbsLink link_;
  std::unique_ptr<RegisteredBuffer> fifo_;
  std::unique_ptr<RegisteredBuffer> staging_;
  std::array<FifoSlot, RecvTable::kMaxRequests> cts_{};  ///< copies of consumed FIFO slots
  CtsMatcher matcher_;
  uint64_t nextFifoSeq_ = 0;
  std::vector<uint32_t> ringNext_;      ///< next completion-ring index per QP
  std::vector<uint32_t> inflight_;      ///< WRs posted and not completed, per QP
  std::vector<std::deque<Part>> queued_;  ///< parts waiting for send-queue room, per QP
  size_t nextQp_ = 0;                   ///< first QP of the next message (spreads small ones)
  /// Sends in flight: one per posted receive buffer at most (32 receives x 8 buffers).
  std::array<SendReq, kRingEntries> reqs_{};
  Clock::time_point waitingSince_{};    ///< first isend that found no CTS (epoch = none)
  Clock::time_point lastProgress_ = Clock::now();
  std::vector<uint64_t> beats_;         ///< payload WRs posted per QP (the heartbeat values)
  std::atomic<uint64_t> seqHint_{0};  ///< receive seq the sender works on (for event-thread errors)
  int subscription_ = 0;
  bool closed_ = false;
  Poison poison_;
};

/// Receiving end (the listener).
class VerbsRecvComm final : public RecvComm {
 public:
  /// `rings` holds kRingEntries ChunkHeaders per QP (the sender writes them), then
  /// kHeartbeatBytes of heartbeat words (one per QP);
  /// `staging` kMaxRequests FifoSlots for CTS records sent without inline. The
  /// caller has posted kRingEntries receive WRs (wr_id = QP index) on every QP.
  VerbsRecvComm(VerbsLink link, std::unique_ptr<RegisteredBuffer> rings,
                std::unique_ptr<RegisteredBuffer> staging);
  ~VerbsRecvComm() override;
  Status Irecv(int n, void** data, const size_t* sizes, const int* tags, MemoryRegion** mrs,
               Request** request) override;
  /// GPU memory (a region registered as NCCL_PTR_CUDA or through DMA-BUF): posts a
  /// 1-byte RDMA READ from the last non-empty buffer into a host word, on a QP
  /// connected to itself on every rail of the comm (as NCCL's IB plugin does: the
  /// read completes only after the earlier PCIe writes to the GPU are visible).
  /// Host memory: *request = NULL. SystemError when the flush QPs cannot be set up.
  Status Iflush(int n, void** data, const int* sizes, MemoryRegion** mrs, Request** request) override;
  Status Test(Request* request, int* done, int* sizes) override;
  void Close() override;

 private:
  struct FlushReq : Request {
    bool used = false;
    int pending = 0;  ///< READs not completed yet
  };
  Status Progress();
  Status PollFlushes();
  Status PostRecv(size_t qp);
  Status OnImmediate(size_t qp, uint32_t index);

  VerbsLink link_;
  std::unique_ptr<RegisteredBuffer> rings_;
  std::unique_ptr<RegisteredBuffer> staging_;
  RecvTable table_;
  Clock::time_point lastProgress_ = Clock::now();
  Clock::time_point eofAt_{};  ///< when the control socket closed (epoch = open)
  uint64_t heartbeatSeen_ = 0;  ///< sum of the heartbeat words at the last look
  std::unique_ptr<QpBundle> flushQps_;         ///< one loop-back QP per rail (made on first use)
  std::unique_ptr<RegisteredBuffer> flushWord_;  ///< where the flush READs land
  std::array<FlushReq, RecvTable::kMaxRequests> flushes_{};
  std::atomic<uint64_t> seqHint_{0};
  int subscription_ = 0;
  bool closed_ = false;
  Poison poison_;
};

}  // namespace railyard::proxy::verbs
