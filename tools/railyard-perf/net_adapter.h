// One version-agnostic view, with v11 semantics, of whichever ncclNet table a
// plugin exports (v11, v10, v9, v8, v7 or v6: every version NCCL 2.28.9 loads,
// fact sheet §1.3), modelled on NCCL 2.28.9's shims (§2.8, src/plugin/net/net_v*.cc):
// older plugins are initialised once per process, v10 gets the comm config on every
// connect, v8 and older get int sizes and their properties are widened to the v11
// layout; v7/v6 regMr takes an int size (>= 2 GiB fails), v6 reports HOST devices
// and has no device-comm arguments.
#pragma once

#include <memory>

#include "plugin/abi/net_v10.h"
#include "plugin/abi/net_v6.h"
#include "plugin/abi/net_v7.h"
#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v8.h"
#include "plugin/abi/net_v9.h"

namespace railyard::perf {

/// The calls railyard-perf makes, in v11 shape. Arguments and results mean
/// what they mean in ncclNet_v11_t (fact sheet §2.5); devComm out-parameters
/// are handled inside (a host benchmark never uses them).
class Net {
 public:
  virtual ~Net() = default;
  /// The table's `name` field (NULL-safe: "" when the plugin left it NULL).
  virtual const char* name() const = 0;
  /// The table version in use: 11, 10, 9, 8, 7 or 6.
  virtual int version() const = 0;
  /// v11: the plugin's init. Older: the plugin's init on the first call only
  /// (later calls count references), *ctx = an adapter context holding `config`.
  virtual ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                            ncclDebugLogger_t logger) = 0;
  /// Number of devices the plugin reports.
  virtual ncclResult_t devices(int* ndev) = 0;
  /// Fills `props` (zeroed first); v8/v9/v10 values are converted, missing
  /// fields synthesised as NCCL's shims do.
  virtual ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) = 0;
  /// Writes up to NCCL_NET_HANDLE_MAXSIZE bytes of handle; never blocks. (ctx unused below v11.)
  virtual ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) = 0;
  /// Never blocks: success with *sendComm == NULL means "call again with the same handle".
  /// v10 receives the config given to init; the device-comm out-parameter stays internal.
  virtual ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) = 0;
  /// Never blocks: success with *recvComm == NULL means "call again".
  virtual ncclResult_t accept(void* listenComm, void** recvComm) = 0;
  /// Registers memory of pointer type `type` (NCCL_PTR_HOST here) on a send or recv comm.
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) = 0;
  /// Releases a registration made by regMr on the same comm.
  virtual ncclResult_t deregMr(void* comm, void* mhandle) = 0;
  /// Tag = the sender's rank; *request == NULL means "try again". No profiler
  /// handle is passed. v8: sizes above 1 GiB fail with ncclInternalError, as in NCCL's shim.
  virtual ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                             void** request) = 0;
  /// `n` ≤ 8 (railyard-perf posts n = 1); *request == NULL means "try again".
  /// v8: sizes above 1 GiB fail and *request is cleared first, as in NCCL's shim.
  virtual ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags,
                             void** mhandles, void** request) = 0;
  /// Never blocks; on *done = 1 writes the bytes moved to sizes[0..n).
  virtual ncclResult_t test(void* request, int* done, int* sizes) = 0;
  /// Closes a sendComm from connect.
  virtual ncclResult_t closeSend(void* sendComm) = 0;
  /// Closes a recvComm from accept.
  virtual ncclResult_t closeRecv(void* recvComm) = 0;
  /// Closes a listenComm from listen (right after its accept, as NCCL does).
  virtual ncclResult_t closeListen(void* listenComm) = 0;
  /// v11: the plugin's finalize. Older: drops the reference init took.
  virtual ncclResult_t finalize(void* ctx) = 0;
};

/// Wrap a table found in a loaded library, one per ABI version. The table must outlive the Net.
std::unique_ptr<Net> WrapNetV11(const ncclNet_v11_t* table);
std::unique_ptr<Net> WrapNetV10(const ncclNet_v10_t* table);
std::unique_ptr<Net> WrapNetV9(const ncclNet_v9_t* table);
std::unique_ptr<Net> WrapNetV8(const ncclNet_v8_t* table);
std::unique_ptr<Net> WrapNetV7(const ncclNet_v7_t* table);
std::unique_ptr<Net> WrapNetV6(const ncclNet_v6_t* table);

/// "ncclSuccess", "ncclSystemError", ... ("ncclResult(<n>)" for unknown values).
const char* ResultName(ncclResult_t r);

}  // namespace railyard::perf
