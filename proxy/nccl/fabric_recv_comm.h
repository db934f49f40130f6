// The receiving side of an NCCL connection over a fabric Endpoint. irecv posts the
// buffers in the RecvTable and writes their clear-to-send record into the sender's
// FIFO (a Write with immediate naming the sender's comm and the slot); the sender
// writes each message into its buffer with one Write whose immediate names this
// comm and the (seq % 32, slot) cell. The immediate arrives after every byte of the
// data; its size (fabric::Event::bytes) is claimed and landed through RecvTable::
// ClaimLanded, which checks it against the posted buffer, the message rules and the
// live registration before the receive can complete.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <vector>

#include "proxy/comm.h"
#include "proxy/nccl/comm_worker.h"
#include "proxy/nccl/fabric_send_comm.h"
#include "proxy/nccl/mem_handle.h"
#include "proxy/nccl/peer_workers.h"
#include "proxy/protocol/recv_table.h"

namespace railyard::proxy::nccl {

/// RecvComm over a fabric Endpoint. Same threading as FabricSendComm.
class FabricRecvComm final : public RecvComm, public CommClient {
 public:
  /// Connects an Endpoint back to the sender's Worker (hello.address) and registers
  /// the outbox the CTS records are written from. `peerWorker` is the Worker id the
  /// hello came from; data immediates are taken from it and from up to as many
  /// Workers as the Endpoint back has routes (PeerWorkers). Call with the CommWorker's lock held (from Accept).
  static Status CreateLocked(CommWorker* cw, size_t deviceIndex, Hello hello, fabric::RemoteKey fifoKey,
                             uint64_t peerWorker, const MrCache* cache, std::shared_ptr<RankSource> rank,
                             std::unique_ptr<FabricRecvComm>* out);
  ~FabricRecvComm() override;

  /// As RecvComm::Irecv with MemHandles (an entry may be NULL only for a 0-byte buffer).
  Status IrecvFabric(int n, void** data, const size_t* sizes, const int* tags, MemHandle* const* mhs,
                     Request** request);
  Status Irecv(int, void**, const size_t*, const int*, MemoryRegion**, Request**) override;
  /// iflush (nccl-net-abi.md §2.5): when the last non-empty buffer of a completed
  /// receive is device memory (its MemHandle's Region of this device is kDevice), one
  /// 1-byte READ of it through this device's loopback Endpoint (CommWorker::
  /// LoopbackLocked); *request is then a flush request to test(). NULL otherwise
  /// (host memory needs no flush). Errors of the loopback's setup and of Read;
  /// InternalError with more than RecvTable::kMaxRequests flushes in flight.
  Status IflushFabric(int n, void** data, const int* sizes, MemHandle* const* mhs, Request** request);
  Status Test(Request* request, int* done, int* sizes) override;
  void Close() override;
  /// The sender, as comm errors name it (PeerInfo::ToString): "peer HOST (pid N, ADDR[
  /// via RELAY (ip:port)]) on rail DEV".
  std::string PeerText() const { return peer_.ToString(); }

  void OnEvent(const fabric::Event& e) override;
  bool FromPeer(uint64_t worker) const override { return peerWorkers_.Has(worker); }
  /// The Workers data is taken from (tests).
  const PeerWorkers& peerWorkers() const { return peerWorkers_; }

 private:
  FabricRecvComm(CommWorker* cw, size_t deviceIndex, const MrCache* cache);
  /// Records the comm's error, naming the peer and the message seq the comm is at (the
  /// oldest receive posted, else the next; WARN when receives are posted, else INFO).
  void Poisoned(const Status& s);
  Status CheckEndpoint();
  /// "receive comm (rank 0, from rank 1)": this process's rank (RankSource: "rank ?"
  /// before its first send on the communicator) and the sender's, from the tags of the
  /// receives (NCCL posts the remote rank as the tag, nccl-net-abi.md §2.5 "irecv";
  /// left out before the first receive).
  std::string Who() const;

  /// A flush in flight (IflushFabric).
  struct FlushRequest : Request {
    bool inUse = false;
    bool done = false;
    Status error;
  };
  /// The flush request `r` is, or NULL when it is a receive request.
  FlushRequest* AsFlush(Request* r);

  CommWorker* cw_;
  size_t dev_;
  std::shared_ptr<RankSource> rank_;  ///< this process's rank in the comm's communicator
  std::atomic<int> peerRank_{-1};     ///< the sender's rank: the first tag of the last irecv (-1: none yet)
  uint32_t id_ = 0;
  bool registered_ = false;
  PeerInfo peer_;
  uint32_t peerCommId_ = 0;
  PeerWorkers peerWorkers_;  ///< the hello's Worker first, then one per further route of the sender
  fabric::RemoteKey fifoKey_;
  std::unique_ptr<fabric::Endpoint> ep_;
  std::vector<FabricCts> outbox_;  ///< CTS records, by seq % 32
  const fabric::Region* outboxRegion_ = nullptr;
  Poison poison_;
  RecvTable table_;
  std::array<RecvTable::Entry*, RecvTable::kMaxRequests> posted_{};  ///< by seq % 32
  std::array<uint64_t, RecvTable::kMaxRequests> postedSeq_{};
  bool closed_ = false;
  /// The peer's close notice arrived: it is tearing its end down, so Close sends no
  /// notice of its own (one it may never read: its close then resets the connection).
  bool peerClosed_ = false;
  std::array<FlushRequest, RecvTable::kMaxRequests> flushes_;
};

}  // namespace railyard::proxy::nccl
