// GinComm: the one implementation of the one-sided semantics behind NCCL's GIN v11
// (proxy mode) and RMA v13/v14 tables (nccl-net-abi.md §4.4; nccl-2.30-abi.md
// §4.7, §5.3). A full mesh of fabric Endpoints over every rank, itself included;
// symmetric windows; iput = fabric Write, iget = fabric Read, iputSignal = the
// optional Write then a remote 64-bit FetchAdd at the signal offset; requests that
// are never NULL; test that never blocks.
//
// The Domain's RegistrationCache and a Worker are parameters (DESIGN.md §2-3): the
// comm is the Worker's one polling thread (it calls Progress under its own mutex,
// so NCCL's application and progress threads may call it at once). Endpoints come
// from Worker::Connect, so relayed Endpoints and other transports drop in.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/event.h"
#include "proxy/fabric/registration_cache.h"
#include "proxy/fabric/worker.h"
#include "proxy/gin/gin_request.h"
#include "proxy/gin/gin_wire.h"
#include "proxy/gin/symmetric_window.h"

namespace railyard::gin {

/// NCCL_NET_SIGNAL_OP_INC / _ADD (nccl-net-abi.md §2.1; NCCL_GIN_SIGNAL_OP_* in 2.30).
inline constexpr uint32_t kSignalOpInc = 1;
inline constexpr uint32_t kSignalOpAdd = 2;

/// Settings of a comm.
struct GinOptions {
  /// A blocking wait (connect, registration) or a request with no completion for this
  /// long poisons the comm (RAILYARD_TIMEOUT_MS), ms.
  int timeoutMs = 30000;
  /// Requests per peer NCCL may keep outstanding (32 × maxRecvs); informational: more
  /// are accepted and queued by the Endpoint.
  int queueDepth = 256;
  /// Registers a DMA-BUF (regMrSymDmaBuf): bytes [offset, offset + bytes) of `fd`,
  /// seen at `data`, all access rights; the Region is released with
  /// RegistrationCache::Release like any other. Unset (the default): the Domain has
  /// no DMA-BUF registration and RegisterWindowDmaBuf refuses with InvalidUsage.
  /// The glue (plugin/gin_runtime.cc) sets it where the Domain can (verbs with
  /// ibv_reg_dmabuf_mr).
  std::function<Status(void* data, uint64_t bytes, int fd, uint64_t offset, fabric::MemoryKind kind,
                       const fabric::Region** out)>
      acquireDmaBuf;
  /// Whether a Worker::Connect error may clear by itself: fabric mode's Domain
  /// (runtime::CableSetDomain) refuses a peer whose host its cabling graph cannot
  /// route to yet (InvalidUsage), and the graph fills in as the cabling agents hear
  /// each other. When set and true, Connect tries that peer again (every 5 ms, the
  /// Worker progressed meanwhile) until timeoutMs from the call's start; then the
  /// error names the wait. Unset (the default): every Connect error is final.
  std::function<bool(const Status& connectError)> routeMayCome;
};

/// What a window's memory is, for the checks made before anything is registered.
/// InvalidUsage naming the transport and the missing capability when `kind` is device
/// memory and the Domain cannot reach it (the TCP fabric copies bytes with the CPU,
/// which cannot read a CUDA pointer); Ok otherwise. `call` opens the message.
Status CheckWindowMemory(const fabric::Domain& domain, fabric::MemoryKind kind, const std::string& call);

/// One connected comm. Thread-safe (one mutex).
class GinComm {
 public:
  /// The collective, blocking connect: `handles[r]` is rank r's 128-byte handle
  /// (PackHandle of its Worker address, allgathered by NCCL), `rank` this rank.
  /// Every handle is parsed and checked (versions, sizes, this rank's own address)
  /// before any Endpoint is made; then one Endpoint per rank (a loop-back one to
  /// itself), a hello record to each, and a wait (bounded by timeoutMs) for every
  /// rank's hello. Errors: InvalidArgument / InvalidUsage for bad handles or ranks
  /// (a version mismatch names both versions); SystemError naming the ranks whose
  /// hello never came.
  static Status Connect(const GinOptions& options, fabric::RegistrationCache& cache,
                        fabric::Worker& worker, std::span<const uint8_t* const> handles, int rank,
                        std::unique_ptr<GinComm>* out);
  ~GinComm();
  GinComm(const GinComm&) = delete;
  GinComm& operator=(const GinComm&) = delete;

  int rank() const { return rank_; }
  int nranks() const { return nranks_; }

  /// Collective symmetric registration of [data, data + bytes): the region comes from
  /// the RegistrationCache, then every rank's base and key are exchanged over the
  /// mesh and checked (same registration number on every rank, sizes > 0) before the
  /// window is usable. `*handle` is the window id (< 2^63: it travels in NCCL's
  /// 63-bit descriptor fields). `mrFlags` may carry FORCE_SO (every signal into the
  /// window is strong) and SIGNAL_NEVER_RESET (a hint). Errors: InvalidArgument for
  /// NULL/0 bytes/unknown flags, the Domain's error (e.g. InvalidUsage for device
  /// memory on a transport that cannot read it), a poisoned comm's error.
  Status RegisterWindow(void* data, uint64_t bytes, fabric::MemoryKind kind, uint64_t mrFlags,
                        uint64_t* handle);
  /// RegisterWindow for a DMA-BUF: bytes [offset, offset + bytes) of `fd`, mapped at
  /// `data` (regMrSymDmaBuf; nccl-2.30-abi.md §5.3). The region comes from
  /// GinOptions::acquireDmaBuf. Errors: those of RegisterWindow, InvalidArgument for
  /// fd < 0, InvalidUsage when the Domain has no DMA-BUF registration (TCP) or cannot
  /// reach device memory, naming the transport; nothing is registered then and the
  /// comm stays usable.
  Status RegisterWindowDmaBuf(void* data, uint64_t bytes, int fd, uint64_t offset, fabric::MemoryKind kind,
                              uint64_t mrFlags, uint64_t* handle);
  /// Drops window `handle` (local: its region goes back to the cache).
  /// InvalidArgument for an unknown handle.
  Status DeregisterWindow(uint64_t handle);

  /// Writes `size` bytes from (this rank's window `srcHandle` + srcOff) to (rank
  /// `peer`'s window `dstHandle` + dstOff). size 0: handles are not looked at.
  /// Every argument is checked before anything is posted: an unknown handle, an
  /// offset or size outside either window or a peer out of range is InvalidArgument
  /// and nothing is written. `*out` is never NULL on success.
  Status Put(uint64_t srcOff, uint64_t srcHandle, uint64_t size, uint64_t dstOff, uint64_t dstHandle,
             uint32_t peer, Request** out);
  /// Put (when size > 0), then a remote 64-bit add at (peer's window `signalHandle` +
  /// signalOff, 8-byte aligned): 1 for kSignalOpInc, `value` for kSignalOpAdd. The add
  /// becomes visible after the put's data; when `strong` (or the signal window is
  /// FORCE_SO) also after every earlier op to that peer (a Fence is posted first when
  /// an earlier Read or add to the peer is still outstanding). Errors as Put, plus a
  /// misaligned or out-of-window signal offset or an unknown op.
  Status PutSignal(uint64_t srcOff, uint64_t srcHandle, uint64_t size, uint64_t dstOff,
                   uint64_t dstHandle, uint32_t peer, uint64_t signalOff, uint64_t signalHandle,
                   uint64_t value, uint32_t op, bool strong, Request** out);
  /// Reads `size` bytes of (peer's window `remoteHandle` + remoteOff) into (this rank's
  /// window `localHandle` + localOff). Errors as Put.
  Status Get(uint64_t remoteOff, uint64_t remoteHandle, uint64_t size, uint64_t localOff,
             uint64_t localHandle, uint32_t peer, Request** out);
  /// A request done once every request posted before it is done (gets landed, put
  /// sources reusable). `peer` must be in range.
  Status Flush(uint32_t peer, Request** out);
  /// Never blocks: progresses once, then `*done` says whether `request` completed
  /// (it is freed then and must not be used again). A failed request, or any call on
  /// a poisoned comm, returns the poison error. A request outstanding longer than
  /// timeoutMs poisons the comm with an error naming rank, peer, rails and sequence.
  /// InvalidArgument for a request this comm does not hold.
  Status Test(Request* request, bool* done);
  /// Drives the Worker (bounded work, never blocks).
  Status Progress();
  /// Ok, or the error that poisoned the comm (sticky).
  Status status() const;
  /// Requests outstanding now.
  size_t Outstanding() const;

 private:
  struct OpInfo {
    Request* request = nullptr;  ///< NULL for record sends
    fabric::OpType type = fabric::OpType::kNone;
    uint32_t peer = 0;
  };
  struct Inbound {
    Record record;
    uint64_t fromWorker = 0;
  };

  GinComm(const GinOptions& options, fabric::RegistrationCache& cache, fabric::Worker& worker,
          int rank, int nranks, uint64_t meshId);

  /// Checks `data`/`bytes`/`mrFlags`/`handle` (InvalidArgument naming `call`).
  static Status CheckWindowArgs(const char* call, void* data, uint64_t bytes, uint64_t mrFlags,
                                uint64_t* handle);
  // All below run with mu_ held.
  /// Exchanges the window of `region` over the mesh and records it; releases the
  /// region on failure.
  Status ExchangeWindowLocked(const fabric::Region* region, void* data, uint64_t bytes, uint64_t mrFlags,
                              uint64_t* handle);
  void PumpLocked();
  void DispatchLocked(fabric::Event& e);
  Status PoisonLocked(Status s);
  Status SendRecordLocked(uint32_t peer, const Record& r);
  /// Waits (pumping, until the deadline) for one record of `kind`/`seq` from every rank
  /// and for every record this rank sent to have been delivered.
  Status WaitRecordsLocked(RecordKind kind, uint64_t seq, const char* what, std::vector<Record>* byRank);
  Status CheckUsableLocked() const;
  Status FindWindowLocked(uint64_t handle, const char* role, const Window** out) const;
  Request* NewRequestLocked(RequestKind kind, uint32_t peer);
  void PostOpLocked(Request* req, fabric::OpType type, uint64_t cookie);
  uint64_t NextCookieLocked() { return ++nextCookie_; }
  std::string RailsText() const;
  std::string Where(uint32_t peer) const;

  const GinOptions options_;
  fabric::RegistrationCache& cache_;
  fabric::Worker& worker_;
  const int rank_;
  const int nranks_;
  const uint64_t meshId_;

  mutable std::mutex mu_;
  Status poison_;
  std::vector<std::unique_ptr<fabric::Endpoint>> endpoints_;  ///< by rank (self included)
  std::vector<uint64_t> peerSeq_;              ///< requests posted per peer
  std::vector<int> unorderedOutstanding_;      ///< Reads/adds outstanding per peer
  int recordSendsOutstanding_ = 0;             ///< hello/window records not yet delivered
  std::unordered_map<uint64_t, OpInfo> ops_;   ///< by cookie
  std::unordered_set<Request*> live_;
  std::set<uint64_t> outstandingNumbers_;      ///< Request::number of unfinished non-flush requests
  std::map<uint64_t, Window> windows_;         ///< by id
  std::vector<Inbound> inbox_;
  std::vector<fabric::Event> events_;
  uint64_t nextCookie_ = 0;
  uint64_t nextRequest_ = 0;
  uint64_t nextWindowSeq_ = 0;
  uint64_t nextWindowId_ = 0;
};

}  // namespace railyard::gin
