// NetRuntime: the ONE owner of the NCCL net plugin's process state, below the ABI
// edge (plugin/net.cc), which only checks arguments, calls it and turns its Status
// into an ncclResult_t. It holds what NCCL's calls share across communicators:
//   - start-up (the first Open): the configuration, the socket devices, the
//     transport choice (TCP, verbs, fabric mode; UsesFabricComms picks the comms
//     written once over the fabric or the older per-transport ones), the RDMA ports,
//     and the FabricRuntime (proxy/runtime/fabric_runtime.h);
//   - every thread the plugin runs: started in one place when the first context
//     opens (RDMA port events, the FabricRuntime's CommWorkers, fabric mode's
//     cabling agent, relay and fabric relay) and stopped when the last one closes;
//   - the device list (NCCL device -> interface, RDMA ports or the fabric) and what
//     each device can do (RouteFacts, from which the edge reports ptrSupport);
//   - route-to-port mapping: which comm a listen or connect makes, over which ports
//     or relayed routes;
//   - the comm registry (every open comm, listen comm and connect in progress, so
//     the last finalize closes what NCCL left open);
//   - memory registrations (the MrCache and every fabric device's cache).
//
// Owner: NetRuntime::Process(), created on first use and never destroyed (NCCL may
// call deregMr after exit handlers ran). Each init context is a CommContext: one per
// communicator, carrying that communicator's RankSource, so the errors of its comms
// name this process's rank in THAT communicator.
//
// Threading: every method is thread-safe (one mutex guards the state; the comms do
// their own locking); Running() reads an atomic.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "env/status.h"
#include "proxy/comm.h"
#include "proxy/fabric/domain.h"
#include "proxy/runtime/route_facts.h"

namespace railyard::runtime {

struct NetState;

/// One communicator's init context (v11 init runs once per communicator, §1.4).
struct CommContext {
  uint64_t commId = 0;
  int trafficClass = -1;  ///< NCCL_NET_TRAFFIC_CLASS_UNDEF when unset
  /// This process's rank in the communicator, named in its comms' errors.
  std::shared_ptr<proxy::RankSource> rank = std::make_shared<proxy::RankSource>();
};

/// Pointer types in NCCL's numbering (NCCL_PTR_HOST, NCCL_PTR_CUDA; plugin/net.cc
/// asserts they match), as the MrCache records them.
inline constexpr int kPtrHost = 1;
inline constexpr int kPtrCuda = 2;

/// What getProperties reports of one device (strings stay valid for the process).
struct DeviceInfo {
  const char* name = nullptr;
  const char* pciPath = nullptr;  ///< NULL when unknown
  int speedMbps = 0;
  int port = 0;                   ///< the RDMA port number (verbs mode), else 0
  /// A device fused by makeVDevice: the physical devices it stripes over (empty for one).
  std::vector<int> fusedFrom;
  RouteFacts routes;              ///< what every route of the device can do
};

/// See file comment.
class NetRuntime {
 public:
  /// The process's runtime (never destroyed).
  static NetRuntime& Process();

  /// Init of one communicator: the first call discovers devices and chooses the
  /// transport; the first call after every context closed starts the threads.
  /// Errors of env::Load, the cluster key, interface and rail selection, the
  /// transport (RAILYARD_TRANSPORT=verbs without a usable port), the FabricRuntime and
  /// the threads' start. On success *out is the context (Close returns it). A failed
  /// Open undoes what it did: every thread it started is stopped and joined (the
  /// cabling agent, relay and fabric relay closed), a failed first discovery closes
  /// the RDMA ports it opened, and the state is as before the call, so a later Open
  /// may succeed (NCCL may also finalize the NULL context or unload the plugin).
  Status Open(uint64_t commId, int trafficClass, CommContext** out);
  /// Finalize of one context; false (nothing done) for NULL or a context not open
  /// (NCCL finalizes after a failed init too). The last one closes every comm still
  /// open and stops every thread the plugin started.
  bool Close(CommContext* ctx);
  /// Some context is open (readable without the lock, on every test()).
  bool Running() const;

  /// Devices of the mode. InvalidUsage before Open.
  Status DeviceCount(int* ndev);
  /// What device `dev` is and can do. InvalidUsage before Open, InvalidArgument for a
  /// device that does not exist.
  Status Device(int dev, DeviceInfo* out);
  /// NIC fusion (makeVDevice) of the `ndevs` physical devices `devs`: the new
  /// device's index in *out. InvalidArgument for ndevs outside 1..kMaxConnRails or a
  /// device that is not physical; InvalidUsage outside verbs mode (TCP cannot fuse
  /// NICs) or with `devs` or `out` NULL.
  Status AddVirtualDevice(int ndevs, const int* devs, int* out);
  /// The process's facts over every RDMA port (regMr's check of CUDA pointers).
  RouteFacts HostRouteFacts();

  /// A listen comm on device `dev`, its handle written into `handle`
  /// (NCCL_NET_HANDLE_MAXSIZE bytes). Errors of CheckDevice and the comm's Create.
  Status Listen(CommContext* ctx, int dev, void* handle, proxy::ListenComm** out);
  /// One step of a connect to `handle` (never blocks): *out NULL with Ok means "call
  /// again with the same handle". The handle is validated on every call.
  Status Connect(CommContext* ctx, int dev, void* handle, proxy::SendComm** out);
  /// One step of an accept on `listen` (a comm this runtime made); *out NULL = not yet.
  Status Accept(proxy::ListenComm* listen, proxy::RecvComm** out);
  /// Closes and frees a send or recv comm. InvalidArgument when it is not open.
  Status CloseComm(proxy::Comm* comm);
  /// Frees a listen comm. InvalidArgument when it is not open.
  Status CloseListen(proxy::ListenComm* listen);

  /// Registers [data, data + size) of pointer type `type` (NCCL's numbering) and
  /// memory `kind` in the MrCache and every fabric device; *mhandle the MemHandle.
  Status RegisterMemory(void* data, size_t size, int type, fabric::MemoryKind kind, void** mhandle);
  /// Registers a DMA-BUF (fd >= 0) for `comm`. InvalidUsage over TCP (no RDMA ports)
  /// or on a comm whose route goes over TCP; errors of the registrations.
  Status RegisterDmaBuf(proxy::Comm* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                        void** mhandle);
  /// Deregisters a MemHandle. InvalidArgument for a handle Register* did not return.
  Status Deregister(void* mhandle);

  /// Whether the comms written once over the fabric serve this process (test hook).
  bool UsesFabricComms();
  /// Whether some context is open and the process runs fabric mode (RAILYARD_FABRIC:
  /// the rails as one device, routes, relays); false before the first Open. For the
  /// GIN/RMA glue (plugin/gin_runtime.cc), which refuses a fabric-mode Domain with no relays.
  bool InFabricMode();

 private:
  NetRuntime();
  /// InvalidUsage before Open, InvalidArgument for a device that does not exist.
  Status CheckDevice(int dev);
  /// First Open: configuration, devices, transport, FabricRuntime. Requires mu.
  Status Discover();
  /// Every thread the plugin runs starts here (the first Open after none was open).
  /// Requires mu.
  Status StartThreads();
  /// Connect with the older comms (TCP, verbs, fabric mode's planned routes).
  Status ConnectOlder(CommContext* ctx, int dev, void* handle, proxy::SendComm** out);

  NetState& g_;
};

// ---- The data path (proxy/runtime/comm_calls.cc): one comm's call, whichever comms
// made it (the fabric comms take MemHandles, the older ones MrCache registrations).

/// isend on `comm` (NCCL tags it with the sender's rank); *request NULL = not yet.
Status IsendOn(proxy::SendComm* comm, void* data, size_t size, int tag, void* mhandle, proxy::Request** request);
/// irecv of `n` buffers on `comm`; `mhandles` may be NULL.
Status IrecvOn(proxy::RecvComm* comm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
               proxy::Request** request);
/// iflush of `n` received buffers on `comm`; *request NULL = no flush needed.
Status IflushOn(proxy::RecvComm* comm, int n, void** data, int* sizes, void** mhandles, proxy::Request** request);

}  // namespace railyard::runtime
