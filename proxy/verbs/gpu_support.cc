#include "proxy/verbs/gpu_support.h"

#include <dlfcn.h>
#include <unistd.h>

namespace railyard::proxy::verbs {

bool GdrPeerMemory(const std::string& sysfsRoot) {
  for (const char* f : {"/kernel/mm/memory_peers/nv_mem/version", "/module/nvidia_peermem/version",
                        "/module/nv_peer_mem/version"}) {
    if (::access((sysfsRoot + f).c_str(), F_OK) == 0) return true;
  }
  return false;
}

bool CudaDmaBuf() {
  static const bool supported = [] {
    void* cuda = ::dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (cuda == nullptr) return false;
    // CUresult is an int enum (0 = CUDA_SUCCESS); CUdevice is an int (cuda.h).
    using InitFn = int (*)(unsigned);
    using CountFn = int (*)(int*);
    using GetFn = int (*)(int*, int);
    using AttrFn = int (*)(int*, int, int);
    auto init = reinterpret_cast<InitFn>(::dlsym(cuda, "cuInit"));
    auto count = reinterpret_cast<CountFn>(::dlsym(cuda, "cuDeviceGetCount"));
    auto get = reinterpret_cast<GetFn>(::dlsym(cuda, "cuDeviceGet"));
    auto attr = reinterpret_cast<AttrFn>(::dlsym(cuda, "cuDeviceGetAttribute"));
    constexpr int kDmaBufSupported = 124;  // CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED
    int n = 0, dev = 0, value = 0;
    const bool ok = init != nullptr && count != nullptr && get != nullptr && attr != nullptr &&
                    init(0) == 0 && count(&n) == 0 && n > 0 && get(&dev, 0) == 0 &&
                    attr(&value, kDmaBufSupported, dev) == 0 && value != 0;
    // libcuda stays loaded: unloading a driver library mid-process is not safe.
    return ok;
  }();
  return supported;
}

}  // namespace railyard::proxy::verbs
