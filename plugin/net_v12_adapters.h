// Adapters between Railyard's v11-shaped implementation and NCCL 2.30's v12 types
// (nccl-2.30-abi.md §2.2-§2.3). Used by the ncclNetPlugin_v12 table
// (plugin/net_v12.cc) and by the GIN/RMA v12-property tables.
#pragma once

#include "plugin/abi/net_v11.h"
#include "plugin/abi/net_v12.h"

namespace railyard::plugin::adapters {

/// Writes every field of `*dst` (128 B, padding zeroed too) from `src`: the v11
/// fields at their v12 offsets, maxMultiRequestSize 1, railId = planeId =
/// NCCL_NET_ID_UNDEF (Railyard's rails are not NCCL rails/planes).
void CopyProperties(const ncclNetProperties_v11_t& src, ncclNetProperties_v12_t* dst);
/// getProperties(dev, &v11) then CopyProperties; the callee's error unchanged, or
/// ncclInternalError for a NULL `props` (left unwritten on error).
ncclResult_t GetPropertiesV12(ncclResult_t (*getProperties)(int, ncclNetProperties_v11_t*), int dev,
                              ncclNetProperties_v12_t* props);
/// v12 makeVDevice (up to 8 members) onto the v11 one (4): ncclInternalError for
/// NULL arguments, ncclInvalidArgument for ndevs outside [0, 4] (Railyard's vNICs
/// have at most NCCL_NET_MAX_DEVS_PER_NIC members).
ncclResult_t MakeVDeviceV12(ncclResult_t (*makeVDevice)(int*, ncclNetVDeviceProps_v11_t*), int* d,
                            ncclNetVDeviceProps_v12_t* props);

}  // namespace railyard::plugin::adapters
