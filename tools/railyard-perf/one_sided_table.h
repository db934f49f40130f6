// One view of the plugin's one-sided tables as NCCL drives them: the GIN v11 table
// (NCCL 2.28, proxy mode), and the RMA v14 and v13 tables (NCCL 2.30.7, through its
// own GIN proxy). One body drives any of them; for RMA the data calls go through a
// context made by createContext (context 0). Found with dlsym in a library opened
// as NCCL opens it. No gtest: shared by tests/conformance and railyard-perf.
//
// Source: shared/docs/nccl-net-abi.md §4.2-§4.4; nccl-2.30-abi.md §4.7, §5.2-§5.3.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "plugin/abi/gin_v11.h"
#include "plugin/abi/rma_v13.h"
#include "plugin/abi/rma_v14.h"

namespace railyard::perf {

/// Which exported table.
enum class OneSidedKind { kGinV11, kRmaV14, kRmaV13 };

/// "gin-v11", "rma-v14", "rma-v13".
const char* OneSidedKindName(OneSidedKind kind);

/// One table of a dlopen'ed library, and the objects NCCL would hold for one comm.
/// Not thread-safe (one proxy thread per comm, as in NCCL).
class OneSidedTable {
 public:
  /// Looks the table up in `lib` (a dlopen handle). ok() is false when missing.
  OneSidedTable(void* lib, OneSidedKind kind);
  bool ok() const { return gin_ != nullptr || rma14_ != nullptr || rma13_ != nullptr; }
  OneSidedKind kind() const { return kind_; }
  /// The exported symbol: "ncclGinPlugin_v11", "ncclRmaPlugin_v14" or "ncclRmaPlugin_v13".
  const char* Symbol() const;
  /// The table's version number: 11, 14 or 13.
  int Version() const;
  /// The table's name field ("?" when the table is missing or its name is null).
  const char* Name() const;

  /// init(&ctx, commId, logger).
  ncclResult_t Init(uint64_t commId, ncclDebugLogger_t logger);
  ncclResult_t Devices(int* ndev);
  /// getProperties(dev): netDeviceType and maxRecvs (from the v11 or v12 struct), and
  /// when not null the device's name and speed (Mbps). Outputs are left alone on failure.
  ncclResult_t Properties(int dev, int* netDeviceType, int* maxRecvs, std::string* name = nullptr,
                          int* speedMbps = nullptr);
  /// listen(ctx, dev, handle[128], &listenComm).
  ncclResult_t Listen(int dev, void* handle);
  /// connect(ctx, handles, nranks, rank, listenComm, &collComm), then closeListen;
  /// for RMA also createContext with `nContexts` contexts. `connectCtx`, when not null,
  /// is passed to connect instead of this table's init context: NCCL 2.30's host RMA
  /// path hands connect the net plugin's context (nccl-2.30-abi.md §5.3).
  ncclResult_t Connect(std::vector<void*>& handles, int rank, int nContexts = 1, void* connectCtx = nullptr);
  /// regMrSym (NCCL_PTR_HOST); for GIN v11 / RMA v13 checks ginHandle == mhandle.
  ncclResult_t RegMrSym(void* data, size_t size, uint64_t mrFlags, void** mhandle);
  ncclResult_t DeregMrSym(void* mhandle);
  ncclResult_t Iput(uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh, uint32_t rank,
                    void** request, int context = 0);
  /// iputSignal; `strong` is passed to RMA v14 only (the others are always strong).
  ncclResult_t IputSignal(uint64_t srcOff, void* srcMh, size_t size, uint64_t dstOff, void* dstMh, uint32_t rank,
                          uint64_t signalOff, void* signalMh, uint64_t value, uint32_t op, bool strong,
                          void** request, int context = 0);
  /// RMA only (GIN v11 has none): ncclInvalidUsage there.
  ncclResult_t Iget(uint64_t remoteOff, void* remoteMh, size_t size, uint64_t localOff, void* localMh,
                    uint32_t rank, void** request, int context = 0);
  ncclResult_t Iflush(void* mhandle, uint32_t rank, void** request, int context = 0);
  /// test(collComm, request, &done).
  ncclResult_t Test(void* request, int* done);
  /// ginProgress(collComm) / rmaProgress(rmaCtx).
  ncclResult_t Progress();
  /// destroyContext (RMA), closeColl.
  ncclResult_t Close();
  ncclResult_t Finalize();

 private:
  OneSidedKind kind_;
  const ncclGin_v11_t* gin_ = nullptr;
  const ncclRma_v14_t* rma14_ = nullptr;
  const ncclRma_v13_t* rma13_ = nullptr;
  void* ctx_ = nullptr;
  void* listenComm_ = nullptr;
  void* collComm_ = nullptr;
  void* rmaCtx_ = nullptr;
};

}  // namespace railyard::perf
