/* Railyard's public C API: the entry points libnccl-net-railyard.so exports next
 * to the NCCL net tables (ncclNetPlugin_v8..v11). Every exported name starts with
 * `railyard_` (plugin/exports.map; tests/scripts/check_exports.sh checks `nm -D`);
 * storage-tier functions will join later.
 *
 * Installed as <prefix>/include/railyard/railyard.h. Consumers find it with
 * `pkg-config --cflags --libs railyard` or `find_package(Railyard)` (target
 * Railyard::nccl-net-railyard); see README.md "Installing". Plain C (C99 or later)
 * and C++. NCCL itself needs none of this: it only dlopens the library.
 */
#ifndef RAILYARD_RAILYARD_H_
#define RAILYARD_RAILYARD_H_

#include "railyard/version.h"

#if defined(__GNUC__) || defined(__clang__)
/** Marks a function libnccl-net-railyard.so exports (default ELF visibility). */
#define RAILYARD_API __attribute__((visibility("default")))
#else
#define RAILYARD_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/** The Railyard project version of the loaded library, "MAJOR.MINOR.PATCH"
 *  (CMake's PROJECT_VERSION), as a static NUL-terminated string. Compare it with
 *  RAILYARD_VERSION_STRING (railyard/version.h) to see whether the header a
 *  program was built with matches the library it runs with. Never NULL; never
 *  fails; thread-safe. */
RAILYARD_API const char* railyard_version(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* RAILYARD_RAILYARD_H_ */
