// The entry points shared by the GIN v11, RMA v14 and RMA v13 tables (and their
// adapters in plugin/gin_v11.cc, rma_v14.cc, rma_v13.cc), as NCCL calls them
// (nccl-net-abi.md §4.2-§4.4; nccl-2.30-abi.md §1.3-§1.5, §4.6-§4.7, §5.2-§5.4).
// Each is a thin edge onto railyard::gin::GinComm: handles are checked by magic,
// errors are logged once (WARN) and returned as ncclResult_t.
//
// Objects handed to NCCL:
//  - ctx (init): this plugin's context; its finalize releases it. Several
//    init/finalize pairs per comm work (GIN v11 calls init again at connect; RMA
//    init runs twice per comm).
//  - listenComm: a Worker whose address is in the 128-byte handle.
//  - collComm: the Worker plus the connected GinComm.
//  - rmaCtx / ginCtx (createContext, RMA only): a collComm and a context count.
//  - mhandle: a window id (1, 2, ...; never NULL, never bit 63), the same value for
//    mhandle and ginHandle.
//  - request: a railyard::gin::Request (never NULL).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/common.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v12.h"

namespace railyard::plugin::gin {

/// The tables' name.
inline constexpr const char* kGinName = "Railyard";

/// Brings up the net plugin's process state (so devices and getProperties use the
/// net numbering NCCL matches by name, §7.3 of the 2.30 sheet) and the one-sided
/// fabric (one reference per ctx), and returns a ctx. Errors of the Domain's creation
/// (e.g. RAILYARD_TRANSPORT=verbs without RDMA ports) fail the init.
ncclResult_t Init(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
/// Releases a ctx from Init; NULL is accepted (after a failed init).
ncclResult_t Finalize(void* ctx);
/// The net plugin's device count.
ncclResult_t Devices(int* ndev);
/// The net plugin's properties of `dev` with netDeviceType GIN_PROXY, version
/// NCCL_GIN_PROXY_VERSION, ptrSupport HOST (plus CUDA when the one-sided fabric's
/// Domain has kCapDeviceMemory), maxRecvs a power of two. Every field written.
ncclResult_t GetProperties(int dev, ncclNetProperties_v11_t* props);
/// The same in the v12 layout (railId = planeId = NCCL_NET_ID_UNDEF).
ncclResult_t GetPropertiesV12(int dev, ncclNetProperties_v12_t* props);
/// Creates a Worker and writes its handle (NCCL_NET_HANDLE_MAXSIZE bytes).
/// `dev` is the net plugin's device index. `ctx` may be any context (unused).
ncclResult_t Listen(void* ctx, int dev, void* handle, void** listenComm);
/// Collective blocking connect over `nranks` handles (all ranks, itself included).
/// `ctx` is not looked at (RMA passes the net plugin's ctx, 2.30 sheet §5.3).
ncclResult_t Connect(void* ctx, void* handles[], int nranks, int rank, void* listenComm,
                     void** collComm);
ncclResult_t CloseListen(void* listenComm);
ncclResult_t CloseColl(void* collComm);
/// Collective symmetric registration; type NCCL_PTR_HOST or NCCL_PTR_CUDA.
ncclResult_t RegMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags,
                      void** mhandle);
/// RegMrSym for DMA-BUF `fd` (bytes [offset, offset + size), mapped at `data`):
/// registered through the fabric Domain where it can (GinOptions::acquireDmaBuf),
/// refused with ncclInvalidUsage naming the transport where it cannot (TCP). The fd
/// stays NCCL's.
ncclResult_t RegMrSymDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset,
                            int fd, uint64_t mrFlags, void** mhandle);
ncclResult_t DeregMrSym(void* collComm, void* mhandle);
ncclResult_t Iput(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                  void* dstMhandle, uint32_t rank, void** request);
ncclResult_t IputSignal(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                        void* dstMhandle, uint32_t rank, uint64_t signalOff, void* signalMhandle,
                        uint64_t signalValue, uint32_t signalOp, bool strong, void** request);
ncclResult_t Iget(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                  void* localMhandle, uint32_t rank, void** request);
/// A request done once every earlier request of the comm is done; `mhandle` may be NULL.
ncclResult_t Iflush(void* collComm, void* mhandle, uint32_t rank, void** request);
ncclResult_t Test(void* collComm, void* request, int* done);
ncclResult_t Progress(void* collComm);

/// RMA / GIN v13 contexts: `nContexts` >= 1 data contexts of `collComm`.
ncclResult_t CreateContext(void* collComm, int nContexts, void** rmaCtx);
ncclResult_t DestroyContext(void* rmaCtx);
/// The collComm of `rmaCtx` after checking 0 <= context < nContexts; NULL on error
/// (logged).
void* ContextComm(void* rmaCtx, int context, const char* call);
/// *hasError = the comm of `rmaCtx` is poisoned.
ncclResult_t QueryLastError(void* rmaCtx, bool* hasError);

/// The collComm of an rmaCtx without a context check (progress).
void* ContextCollComm(void* rmaCtx);

}  // namespace railyard::plugin::gin
