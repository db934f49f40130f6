// Railyard's own C entry points, exported from libnccl-net-railyard.so next to
// the NCCL tables (ncclNetPlugin_v8..v11). Every exported name starts with
// `railyard_` (see plugin/exports.map); storage-tier functions will join later.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/// The Railyard project version ("MAJOR.MINOR.PATCH", CMake's PROJECT_VERSION)
/// as a static NUL-terminated string. Never NULL; never fails; thread-safe.
__attribute__((visibility("default"))) const char* railyard_version(void);

#ifdef __cplusplus
}  // extern "C"
#endif
