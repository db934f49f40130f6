// The accepting side of NCCL connections over the fabric: a listen id at the
// device's CommWorker. Connectors' hellos (fabric Send records naming the listen
// id) queue here; accept turns the oldest into a FabricRecvComm. The listen handle
// carries the Worker's packed address, the listen id, pid and host
// (nccl_records.h: FabricHandleWire).
#pragma once

#include <deque>
#include <memory>

#include "proxy/comm.h"
#include "proxy/nccl/comm_worker.h"
#include "proxy/nccl/fabric_recv_comm.h"

namespace railyard::proxy::nccl {

/// ListenComm over a CommWorker. Accept never blocks.
class FabricListenComm final : public ListenComm, public HelloSink {
 public:
  /// Most hellos held before accept takes them; more are refused (logged).
  static constexpr size_t kMaxPendingHellos = 1024;

  /// Registers a fresh random listen id and fills `handle` (128 bytes).
  /// InvalidUsage when the CommWorker is stopped.
  /// `rank`: the communicator's RankSource, handed to every accepted comm.
  static Status Create(CommWorker* cw, size_t deviceIndex, const LocalIdentity& self, const MrCache* cache,
                       std::shared_ptr<RankSource> rank, std::unique_ptr<FabricListenComm>* out, void* handle);
  ~FabricListenComm() override;

  /// One Progress pass, then a receive comm for the oldest hello, or NULL.
  Status Accept(RecvComm** recvComm) override;
  void OnHello(Hello hello, fabric::RemoteKey fifoKey, uint64_t peer) override;

 private:
  FabricListenComm(CommWorker* cw, size_t deviceIndex, const MrCache* cache)
      : cw_(cw), dev_(deviceIndex), cache_(cache) {}
  struct Pending {
    Hello hello;
    fabric::RemoteKey fifoKey;
    uint64_t peer = 0;
  };
  CommWorker* cw_;
  size_t dev_;
  const MrCache* cache_;
  std::shared_ptr<RankSource> rank_;
  uint64_t listenId_ = 0;
  std::deque<Pending> pending_;
};

}  // namespace railyard::proxy::nccl
