/* Railyard's public C API: the entry points libnccl-net-railyard.so exports next
 * to the NCCL net tables (ncclNetPlugin_v8..v11). Every exported name starts with
 * `railyard_` (plugin/exports.map; tests/scripts/check_exports.sh checks `nm -D`);
 * the storage tiers' functions have their own sections below.
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


/* ---- Snapshot tier: railyard_snapshot_* ------------------------------------------
 * Fixed-size state blobs (SSM snapshots, KV blocks) spilled to a peer host's memory
 * and, behind it, the peer's local disk: an arena of one kind served by
 * `railyardd --snapshot-arena kind=K,mode=raw|paging,blob=BYTES,slots=N`.
 * Raw mode: the caller owns the arena and writes/reads whole blobs at offsets.
 * Paging mode: the peer owns residency; blobs are stored and fetched by a 64-bit
 * key, evicted to the peer's swap file (RAILYARD_SWAP_DIR) when memory runs out and
 * faulted back on get. Data moves with one-sided fabric Writes/Reads over every
 * rail through a registered staging buffer; every call completes before it
 * returns (after put, the blob is in the peer's arena or swap; durably with
 * RAILYARD_SWAP_SYNC=1 on the peer).
 *
 * Return values: 0 on success, else a railyard error code equal to ncclResult_t
 * (2 system/network error, 4 invalid argument, 5 invalid usage, 6 remote error);
 * railyard_snapshot_last_error() then says what failed. A handle may be used by one
 * thread at a time (calls on one handle are serialised by a lock); different
 * handles are independent. After a network error a handle stays failed: close it. */

/** Opaque connection to one arena of one peer. */
typedef struct railyard_snapshot railyard_snapshot_t;

/** Arena modes (the handshake's mode). */
#define RAILYARD_SNAPSHOT_RAW 1
#define RAILYARD_SNAPSHOT_PAGING 2

/** Connects to the arena `kind` (1..31 bytes of [A-Za-z0-9_.-]) served at
 *  `host` (IPv4 dotted quad) : `port`. `mode`, `arena_bytes` (slots x blob bytes)
 *  and `blob_bytes` must equal the peer's arena: the peer refuses anything else
 *  naming what differs (returns 5). On success `*out` is a new handle. */
RAILYARD_API int railyard_snapshot_connect(const char* host, unsigned short port, const char* kind, int mode,
                                           unsigned long long arena_bytes, unsigned long long blob_bytes,
                                           railyard_snapshot_t** out);
/** Paging mode: stores `bytes` (must equal the blob bytes) of `data` under `key`,
 *  replacing any earlier blob of the key. A full swap disk at the peer is an error
 *  (2 or 6, message "swap disk full") and leaves earlier blobs readable. */
RAILYARD_API int railyard_snapshot_put(railyard_snapshot_t* s, unsigned long long key, const void* data,
                                       unsigned long long bytes);
/** Paging mode: fetches `key` into `buf` (`bytes` = the blob bytes); `*found` = 1,
 *  or 0 (and `buf` untouched) when the peer does not hold the key. The bytes are
 *  checked against the blob's xxHash64 (6 on a mismatch). */
RAILYARD_API int railyard_snapshot_get(railyard_snapshot_t* s, unsigned long long key, void* buf,
                                       unsigned long long bytes, int* found);
/** Paging mode: forgets `key`; `*found` (may be NULL) says whether it was there. */
RAILYARD_API int railyard_snapshot_remove(railyard_snapshot_t* s, unsigned long long key, int* found);
/** Raw mode: writes one whole blob (`bytes` = blob bytes) at `offset` (a multiple of
 *  the blob bytes inside the arena); 4 and nothing written otherwise. */
RAILYARD_API int railyard_snapshot_write_at(railyard_snapshot_t* s, unsigned long long offset, const void* data,
                                            unsigned long long bytes);
/** Raw mode: reads the whole blob at `offset` into `buf`; checks as write_at. */
RAILYARD_API int railyard_snapshot_read_at(railyard_snapshot_t* s, unsigned long long offset, void* buf,
                                           unsigned long long bytes);
/** Closes the connection (uncommitted puts are dropped by the peer). NULL is fine. */
RAILYARD_API void railyard_snapshot_close(railyard_snapshot_t* s);
/** The message of this thread's last failed railyard_snapshot_* call ("" if none);
 *  valid until this thread's next call. */
RAILYARD_API const char* railyard_snapshot_last_error(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* RAILYARD_RAILYARD_H_ */
