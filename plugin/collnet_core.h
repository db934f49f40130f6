// Railyard's one implementation of the NCCL CollNet API, in v12 shape. The exported
// tables (plugin/collnet_v12.cc, _v11, _v10 (+v9), _v8) are thin adapters onto it.
// Calling rules: /work/shared/docs/nccl-net-abi.md §3.2 and nccl-2.30-abi.md §3, §7
// (one rank per node; connect is blocking and collective; a failed connect turns
// CollNet off for the communicator, so it must fail cleanly; devices() must report
// the same count on every node).
//
// The collectives run in proxy/collectives (CollComm on its CollProxy thread) over a
// fabric Worker per collComm; buffers are host memory (ptrSupport NCCL_PTR_HOST).
#pragma once

#include <cstddef>
#include <cstdint>

#include "plugin/abi/collnet_v11.h"
#include "plugin/abi/collnet_v12.h"

namespace railyard::plugin::collnet {

/// Name reported in the tables' `name` field.
inline constexpr const char* kCollNetName = "Railyard";

/// Per-communicator init (v11/v12); takes a runtime reference. `ctx` gets an
/// opaque context that Finalize releases.
ncclResult_t Init(void** ctx, uint64_t commId, ncclDebugLogger_t logFunction);
ncclResult_t Finalize(void* ctx);
/// Always 1 (one virtual device over every rail): the same on every node, whatever
/// its rails, because NCCL aborts comm init when nodes disagree (2.30 §7 gotcha 15).
ncclResult_t Devices(int* ndev);
/// Device 0: the net plugin's device 0 (same name, so NCCL marks that NIC coll=1)
/// with ptrSupport HOST and maxCollBytes = MAX_COLLNET_SIZE; our own values when
/// the net table is not initialised. InvalidArgument for another dev or NULL.
ncclResult_t GetPropertiesV11(int dev, ncclNetProperties_v11_t* props);
ncclResult_t GetPropertiesV12(int dev, ncclNetProperties_v12_t* props);
/// Creates this rank's Worker and writes `handle` (128 bytes, plugin/collnet_handle.h:
/// the Worker's address and this rank's locator: host, cabling-graph neighbours, rail
/// networks). Never blocks.
ncclResult_t Listen(void* ctx, int dev, void* handle, void** listenComm);
/// Blocking, collective: validates every handle, finds the shape from them
/// (plugin/collnet_shape.h CollnetTopology), connects to the shape's neighbours,
/// exchanges staging keys, starts the proxy thread. On any error *collComm = NULL
/// and an error is returned (NCCL falls back to its own algorithms).
ncclResult_t Connect(void* handles[], int nranks, int rank, void* listenComm, void** collComm);
/// 1 for every datatype 0..11 and op 0..4 (sum, prod, max, min, avg); 0 otherwise.
ncclResult_t ReduceSupport(ncclDataType_t dataType, ncclRedOp_t redOp, int* supported);
/// Host memory only (NCCL_PTR_HOST): InvalidUsage for CUDA pointers and DMA-BUF.
ncclResult_t RegMr(void* collComm, void* data, size_t size, int type, void** mhandle);
ncclResult_t RegMrDmaBuf(void* collComm, void* data, size_t size, int type, uint64_t offset,
                         int fd, void** mhandle);
ncclResult_t DeregMr(void* collComm, void* mhandle);
/// `count` in elements; Avg divides the sum by nranks once.
ncclResult_t Iallreduce(void* collComm, void* sendData, void* recvData, size_t count,
                        ncclDataType_t dataType, ncclRedOp_t redOp, void* sendMhandle,
                        void* recvMhandle, void** request);
/// Produces bytes [windowOffset, + windowBytes) of the nranks x bytesPerRank result
/// into recvParts (any number of parts; 1 part that covers the window is used in
/// place, others through a bounce buffer).
ncclResult_t Iallgather(void* collComm, void* sendData, int nRecvParts, ncclNetSGE_v12_t* recvParts,
                        size_t bytesPerRank, size_t windowOffset, size_t windowBytes,
                        void* sendMhandle, void** request);
/// The mirror of Iallgather: sendParts hold windowBytes of the input; this rank's
/// reduced part of the window goes to recvData.
ncclResult_t Ireducescatter(void* collComm, int nSendParts, ncclNetSGE_v12_t* sendParts,
                            void* recvData, size_t bytesPerRank, size_t windowOffset,
                            size_t windowBytes, ncclDataType_t dataType, ncclRedOp_t redOp,
                            void* recvMhandle, void** request);
/// Host memory: nothing to flush; returns a request that tests done.
ncclResult_t Iflush(void* collComm, void* data, int size, void* mhandle, void** request);
/// *size (may be NULL) = bytes of this rank's result. A done or failed request is freed.
ncclResult_t Test(void* request, int* done, int* size);
ncclResult_t CloseColl(void* collComm);
ncclResult_t CloseListen(void* listenComm);
/// Only the trivial fusion (device 0 alone) is accepted: *d = 0.
ncclResult_t MakeVDevice(int* d, int ndevs, const int* devs);

/// v8-v10 init(logger): one process-wide context, made on the first call.
ncclResult_t InitLegacy(ncclDebugLogger_t logFunction);
/// v8-v10 listen(dev, handle, listenComm): Listen with the legacy context.
ncclResult_t ListenLegacy(int dev, void* handle, void** listenComm);

}  // namespace railyard::plugin::collnet
