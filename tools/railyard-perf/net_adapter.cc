#include "tools/railyard-perf/net_adapter.h"

#include <climits>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>

namespace railyard::perf {
namespace {

/// The context older-version adapters hand out (NCCL's shims do the same).
struct LegacyCtx {
  ncclNetCommConfig_v10_t config;
};

/// Copies the common v9/v10 properties layout into v11's.
template <typename P>
void WidenV9Props(const P& in, ncclNetProperties_v11_t* out) {
  out->name = in.name;
  out->pciPath = in.pciPath;
  out->guid = in.guid;
  out->ptrSupport = in.ptrSupport;
  out->regIsGlobal = in.regIsGlobal;
  out->forceFlush = in.forceFlush;
  out->speed = in.speed;
  out->port = in.port;
  out->latency = in.latency;
  out->maxComms = in.maxComms;
  out->maxRecvs = in.maxRecvs;
  out->netDeviceType = in.netDeviceType;
  out->netDeviceVersion = in.netDeviceVersion;
  out->vProps.ndevs = in.vProps.ndevs;
  for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) out->vProps.devs[i] = in.vProps.devs[i];
  out->maxP2pBytes = in.maxP2pBytes;
  out->maxCollBytes = in.maxCollBytes;
  out->maxMultiRequestSize = 1;
}

/// One adapter for every version; `if constexpr` picks each call's shape.
template <typename Table, int kVersion>
class TableNet final : public Net {
 public:
  explicit TableNet(const Table* t) : t_(t) {}

  const char* name() const override { return t_->name ? t_->name : ""; }
  int version() const override { return kVersion; }

  ncclResult_t init(void** ctx, uint64_t commId, ncclNetCommConfig_v11_t* config,
                    ncclDebugLogger_t logger) override {
    if constexpr (kVersion == 11) {
      return t_->init(ctx, commId, config, logger, nullptr);
    } else {
      (void)commId;
      std::lock_guard<std::mutex> lock(mu_);
      if (refs_ == 0) {
        ncclResult_t r;
        if constexpr (kVersion == 10) {
          r = t_->init(logger, nullptr);
        } else {
          r = t_->init(logger);
        }
        if (r != ncclSuccess) {
          *ctx = nullptr;
          return r;
        }
      }
      ++refs_;
      auto* c = new LegacyCtx{};
      c->config.trafficClass = config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF;
      *ctx = c;
      return ncclSuccess;
    }
  }

  ncclResult_t devices(int* ndev) override { return t_->devices(ndev); }

  ncclResult_t getProperties(int dev, ncclNetProperties_v11_t* props) override {
    std::memset(props, 0, sizeof(*props));
    if constexpr (kVersion == 11) {
      return t_->getProperties(dev, props);
    } else if constexpr (kVersion == 10) {
      ncclNetProperties_v10_t p{};
      const ncclResult_t r = t_->getProperties(dev, &p);
      if (r == ncclSuccess) WidenV9Props(p, props);
      return r;
    } else if constexpr (kVersion == 9) {
      ncclNetProperties_v9_t p{};
      const ncclResult_t r = t_->getProperties(dev, &p);
      if (r == ncclSuccess) WidenV9Props(p, props);
      return r;
    } else {
      std::conditional_t<kVersion == 8, ncclNetProperties_v8_t,
                         std::conditional_t<kVersion == 7, ncclNetProperties_v7_t, ncclNetProperties_v6_t>>
          p{};
      const ncclResult_t r = t_->getProperties(dev, &p);
      if (r != ncclSuccess) return r;
      props->name = p.name;
      props->pciPath = p.pciPath;
      props->guid = p.guid;
      props->ptrSupport = p.ptrSupport;
      if constexpr (kVersion == 8) props->regIsGlobal = p.regIsGlobal;  // v7/v6 shims: 0
      props->forceFlush = 0;
      props->speed = p.speed;
      props->port = p.port;
      props->latency = p.latency;
      props->maxComms = p.maxComms;
      props->maxRecvs = p.maxRecvs;
      if constexpr (kVersion >= 7) {
        props->netDeviceType = p.netDeviceType;
        props->netDeviceVersion = p.netDeviceVersion;
      } else {  // v6 has no offload fields: NCCL's shim reports a host device
        props->netDeviceType = NCCL_NET_DEVICE_HOST;
        props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
      }
      props->vProps.ndevs = 1;
      props->vProps.devs[0] = dev;
      props->maxP2pBytes = MAX_NET_SIZE;
      props->maxCollBytes = MAX_COLLNET_SIZE;
      props->maxMultiRequestSize = 1;
      return r;
    }
  }

  ncclResult_t listen(void* ctx, int dev, void* handle, void** listenComm) override {
    if constexpr (kVersion == 11) {
      return t_->listen(ctx, dev, handle, listenComm);
    } else {
      (void)ctx;
      return t_->listen(dev, handle, listenComm);
    }
  }

  ncclResult_t connect(void* ctx, int dev, void* handle, void** sendComm) override {
    ncclNetDeviceHandle_v11_t* devComm = nullptr;
    if constexpr (kVersion == 11) {
      return t_->connect(ctx, dev, handle, sendComm, &devComm);
    } else if constexpr (kVersion == 10) {
      return t_->connect(dev, &static_cast<LegacyCtx*>(ctx)->config, handle, sendComm, &devComm);
    } else if constexpr (kVersion >= 7) {
      (void)ctx;
      return t_->connect(dev, handle, sendComm, &devComm);
    } else {
      (void)ctx;
      (void)devComm;
      return t_->connect(dev, handle, sendComm);
    }
  }

  ncclResult_t accept(void* listenComm, void** recvComm) override {
    if constexpr (kVersion >= 7) {
      ncclNetDeviceHandle_v11_t* devComm = nullptr;
      return t_->accept(listenComm, recvComm, &devComm);
    } else {
      return t_->accept(listenComm, recvComm);
    }
  }

  ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) override {
    if constexpr (kVersion >= 8) {
      return t_->regMr(comm, data, size, type, mhandle);
    } else {
      if (size >= (std::size_t{1} << 31)) return ncclInternalError;  // as NCCL's v7/v6 shims
      return t_->regMr(comm, data, int(size), type, mhandle);
    }
  }
  ncclResult_t deregMr(void* comm, void* mhandle) override { return t_->deregMr(comm, mhandle); }

  ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle,
                     void** request) override {
    if constexpr (kVersion >= 10) {
      return t_->isend(sendComm, data, size, tag, mhandle, nullptr, request);
    } else if constexpr (kVersion == 9) {
      return t_->isend(sendComm, data, size, tag, mhandle, request);
    } else {
      if (size > MAX_NET_SIZE) return ncclInternalError;
      return t_->isend(sendComm, data, int(size), tag, mhandle, request);
    }
  }

  ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                     void** request) override {
    if (n < 1 || n > kMaxRecvs) return ncclInternalError;
    if constexpr (kVersion >= 10) {
      void* phandles[kMaxRecvs] = {};
      return t_->irecv(recvComm, n, data, sizes, tags, mhandles, phandles, request);
    } else if constexpr (kVersion == 9) {
      return t_->irecv(recvComm, n, data, sizes, tags, mhandles, request);
    } else {
      int intSizes[kMaxRecvs];
      for (int i = 0; i < n; ++i) {
        if (sizes[i] > MAX_NET_SIZE) return ncclInternalError;
        intSizes[i] = int(sizes[i]);
      }
      *request = nullptr;  // the v8/v7/v6 shims clear the optional-completion sentinel
      return t_->irecv(recvComm, n, data, intSizes, tags, mhandles, request);
    }
  }

  ncclResult_t test(void* request, int* done, int* sizes) override { return t_->test(request, done, sizes); }
  ncclResult_t closeSend(void* sendComm) override { return t_->closeSend(sendComm); }
  ncclResult_t closeRecv(void* recvComm) override { return t_->closeRecv(recvComm); }
  ncclResult_t closeListen(void* listenComm) override { return t_->closeListen(listenComm); }

  ncclResult_t finalize(void* ctx) override {
    if constexpr (kVersion == 11) {
      return t_->finalize ? t_->finalize(ctx) : ncclSuccess;
    } else {
      // As NCCL's shims: the plugin itself gets no finalize call.
      if (ctx != nullptr) {
        delete static_cast<LegacyCtx*>(ctx);
        std::lock_guard<std::mutex> lock(mu_);
        if (refs_ > 0) --refs_;
      }
      return ncclSuccess;
    }
  }

 private:
  static constexpr int kMaxRecvs = 8;
  const Table* t_;
  std::mutex mu_;
  int refs_ = 0;
};

}  // namespace

std::unique_ptr<Net> WrapNetV11(const ncclNet_v11_t* t) { return std::make_unique<TableNet<ncclNet_v11_t, 11>>(t); }
std::unique_ptr<Net> WrapNetV10(const ncclNet_v10_t* t) { return std::make_unique<TableNet<ncclNet_v10_t, 10>>(t); }
std::unique_ptr<Net> WrapNetV9(const ncclNet_v9_t* t) { return std::make_unique<TableNet<ncclNet_v9_t, 9>>(t); }
std::unique_ptr<Net> WrapNetV8(const ncclNet_v8_t* t) { return std::make_unique<TableNet<ncclNet_v8_t, 8>>(t); }
std::unique_ptr<Net> WrapNetV7(const ncclNet_v7_t* t) { return std::make_unique<TableNet<ncclNet_v7_t, 7>>(t); }
std::unique_ptr<Net> WrapNetV6(const ncclNet_v6_t* t) { return std::make_unique<TableNet<ncclNet_v6_t, 6>>(t); }

const char* ResultName(ncclResult_t r) {
  switch (r) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "ncclResult(unknown)";
  }
}

}  // namespace railyard::perf
