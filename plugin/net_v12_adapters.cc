// See net_v12_adapters.h. Source: nccl-2.30-abi.md §2.2, §2.3, §1.5.
#include "plugin/net_v12_adapters.h"

#include <cstring>

namespace railyard::plugin::adapters {

void CopyProperties(const ncclNetProperties_v11_t& p, ncclNetProperties_v12_t* props) {
  std::memset(props, 0, sizeof *props);
  props->name = p.name;
  props->pciPath = p.pciPath;
  props->guid = p.guid;
  props->ptrSupport = p.ptrSupport;
  props->regIsGlobal = p.regIsGlobal;
  props->forceFlush = p.forceFlush;
  props->speed = p.speed;
  props->port = p.port;
  props->latency = p.latency;
  props->maxComms = p.maxComms;
  props->maxRecvs = p.maxRecvs;
  props->netDeviceType = p.netDeviceType;
  props->netDeviceVersion = p.netDeviceVersion;
  props->vProps.ndevs = p.vProps.ndevs;
  for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) props->vProps.devs[i] = p.vProps.devs[i];
  props->maxP2pBytes = p.maxP2pBytes;
  props->maxCollBytes = p.maxCollBytes;
  props->maxMultiRequestSize = 1;
  props->railId = NCCL_NET_ID_UNDEF;
  props->planeId = NCCL_NET_ID_UNDEF;
}

ncclResult_t GetPropertiesV12(ncclResult_t (*getProperties)(int, ncclNetProperties_v11_t*), int dev,
                              ncclNetProperties_v12_t* props) {
  if (props == nullptr) return ncclInternalError;
  ncclNetProperties_v11_t v11;
  ncclResult_t rc = getProperties(dev, &v11);
  if (rc != ncclSuccess) return rc;
  CopyProperties(v11, props);
  return ncclSuccess;
}

ncclResult_t MakeVDeviceV12(ncclResult_t (*makeVDevice)(int*, ncclNetVDeviceProps_v11_t*), int* d,
                            ncclNetVDeviceProps_v12_t* props) {
  if (d == nullptr || props == nullptr) return ncclInternalError;
  if (props->ndevs < 0 || props->ndevs > NCCL_NET_MAX_DEVS_PER_NIC) return ncclInvalidArgument;
  ncclNetVDeviceProps_v11_t v11{};
  v11.ndevs = props->ndevs;
  for (int i = 0; i < props->ndevs; ++i) v11.devs[i] = props->devs[i];
  return makeVDevice(d, &v11);
}

}  // namespace railyard::plugin::adapters
