/* Railyard's public C API: the entry points libnccl-net-railyard.so exports next
 * to the NCCL plugin tables (ncclNetPlugin_v8..v12, ncclCollNetPlugin_v8..v12,
 * ncclGinPlugin_v11, ncclRmaPlugin_v13/_v14). Every other exported name starts with
 * `railyard_` (in the source tree: plugin/exports.map, checked against `nm -D` by
 * tests/scripts/check_exports.sh);
 * the storage tiers' functions (railyard_expert_*, railyard_snapshot_*) follow below.
 *
 * Installed as <prefix>/include/railyard/railyard.h. Consumers find it with
 * `pkg-config --cflags --libs railyard` or `find_package(Railyard)` (target
 * Railyard::nccl-net-railyard); see README.md "Installing". Plain C (C99 or later)
 * and C++. NCCL itself needs none of this: it only dlopens the library.
 */
#ifndef RAILYARD_RAILYARD_H_
#define RAILYARD_RAILYARD_H_

#include "railyard/version.h"

#include <stddef.h>
#include <stdint.h>

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

/* ---------------------------------------------------------------------------
 * Expert tier (railyard_expert_*): fetch MoE expert records (one expert's tensors of
 * one MoE layer) from a peer serving an expert store (`railyardd --expert-store DIR`)
 * into a caller's arena. Over RAILYARD_EXPERT_TRANSPORT_READ the records are fabric
 * Reads of the peer's memory (RDMA READ on verbs); over ..._TCP they are requests on
 * the control connection. The arena is registered through the process's registration
 * cache. See, in the source tree, docs/architecture.md "Expert tier" and the Python
 * binding python/railyard/expert.py.
 *
 * Errors: every function returns 0 (RAILYARD_EXPERT_OK) or one of the
 * RAILYARD_EXPERT_E* causes below; railyard_expert_last_error() gives the sentence
 * ("expert OUT_OF_RANGE: layer index 9 ...") of the calling thread's last failure.
 * Nothing partial is returned as success: a batch succeeds only when every record
 * landed and (unless switched off) matched its checksum.
 * A handle is not thread-safe: use it from one thread at a time.
 * ------------------------------------------------------------------------- */

/** Causes (the same numbers as ExpertErrc in the source tree's storage/expert/expert_error.h). */
enum {
  RAILYARD_EXPERT_OK = 0,
  RAILYARD_EXPERT_EMANIFEST_TOO_LARGE = 1, /**< manifest over the size cap */
  RAILYARD_EXPERT_EMANIFEST_TRUNCATED = 2, /**< manifest ended early */
  RAILYARD_EXPERT_EMANIFEST_VERSION = 3,   /**< another format or version */
  RAILYARD_EXPERT_EMANIFEST_INVALID = 4,   /**< malformed or inconsistent manifest */
  RAILYARD_EXPERT_ESTORE_INCONSISTENT = 5, /**< layer files disagree with the manifest */
  RAILYARD_EXPERT_EUNKNOWN_TRANSPORT = 6,  /**< the peer does not serve that transport */
  RAILYARD_EXPERT_EOUT_OF_RANGE = 7,       /**< layer/expert outside the store, slot outside the arena */
  RAILYARD_EXPERT_EPEER_LOST = 8,          /**< the peer died, closed or went silent */
  RAILYARD_EXPERT_ESTORE_CHANGED = 9,      /**< the peer's store changed under it */
  RAILYARD_EXPERT_ECHECKSUM_MISMATCH = 10, /**< a record's xxHash differs from the manifest */
  RAILYARD_EXPERT_EADMISSION_REFUSED = 11, /**< the peer's pin cap (RAILYARD_EXPERT_PIN_CAP) is full */
  RAILYARD_EXPERT_EPROTOCOL = 12,          /**< a malformed message from the peer, or a port that is not an
                                               expert store's (a snapshot peer's is named so) */
  RAILYARD_EXPERT_ESYSTEM = 13,            /**< a local syscall or registration failed */
  RAILYARD_EXPERT_EINVALID_ARGUMENT = 14,  /**< NULL, zero bytes, bad transport value, overlapping arena slots;
                                               at open also port 0, a host name that does not resolve, a
                                               RAILYARD_* variable that does not parse (named) */
};

/** Transports a client may choose at open. */
enum {
  RAILYARD_EXPERT_TRANSPORT_TCP = 1,  /**< records as replies on the control connection */
  RAILYARD_EXPERT_TRANSPORT_READ = 2, /**< records as fabric Reads of the peer's mapped files */
};

/** An open connection to an expert peer (opaque). */
typedef struct railyard_expert railyard_expert;

/** One record of a batch: (layer index 0..layers-1 into the manifest's "layers",
 *  expert 0..experts-1) lands at arena + arena_offset, record_stride bytes.
 *  arena_offset is a multiple of the manifest's "alignment" (every multiple of
 *  record_stride is one), else EINVALID_ARGUMENT before anything moves. */
typedef struct railyard_expert_record {
  uint32_t layer;
  uint32_t reserved; /**< must be 0 */
  uint64_t expert;
  uint64_t arena_offset;
} railyard_expert_record;

/** Shape of the store, from its manifest. */
typedef struct railyard_expert_layout {
  uint64_t layers;            /**< MoE layers in the store */
  uint64_t experts_per_layer; /**< experts in each layer */
  uint64_t record_stride;     /**< bytes of one record (an arena slot) */
  uint64_t record_bytes;      /**< bytes of a record the tensors use (<= stride) */
} railyard_expert_layout;

/** Connects to the expert peer `peer`, receives and validates its manifest (see below).
 *  `peer` is "IPv4:PORT" (railyardd's --expert-listen: a TCP control connection to it),
 *  or "host:NAME": the host called NAME (its RAILYARD_HOST_NAME or system host name)
 *  in this host's cabling graph, reached through railyardd's tier tunnel there
 *  (RAILYARD_TIER_TUNNEL_PORT), straight on a cable or, when there is none, through
 *  the fabric's relays; control and data then take the same route. The first host:
 *  open starts this process's cabling agent over RAILYARD_SOCKET_IFNAME's rails and
 *  waits up to RAILYARD_TIMEOUT_MS (at least 5 x RAILYARD_DISCOVERY_DEAD_MS) for a
 *  route (EPEER_LOST naming the host and the hosts known otherwise). Ranks are not
 *  peer names: name the host. Then: receives and validates its
 *  manifest, chooses `transport` (RAILYARD_EXPERT_TRANSPORT_*) and registers
 *  [arena, arena + arena_bytes) (host memory) for the records to land in. With
 *  `verify_checksums` non-zero every fetched record's XXH3-64 is checked. On success
 *  *out is a handle to close with railyard_expert_close. */
RAILYARD_API int railyard_expert_open(const char* peer, int transport, int verify_checksums, void* arena,
                                      uint64_t arena_bytes, railyard_expert** out);
/** The store's layout. EINVALID_ARGUMENT for NULL. */
RAILYARD_API int railyard_expert_layout_get(const railyard_expert* h, railyard_expert_layout* out);
/** Copies the manifest JSON (NUL-terminated) into buf when it fits (*needed = its
 *  length + 1 either way); EINVALID_ARGUMENT when buf is too small. */
RAILYARD_API int railyard_expert_manifest(const railyard_expert* h, char* buf, size_t bytes, size_t* needed);
/** Fetches one record into the arena at arena_offset (a multiple of the manifest's
 *  alignment, as in railyard_expert_record). */
RAILYARD_API int railyard_expert_fetch(railyard_expert* h, uint32_t layer, uint64_t expert, uint64_t arena_offset);
/** Fetches `count` records (all of them, or an error: see above). EINVALID_ARGUMENT,
 *  before anything moves, when two records' arena slots overlap (each takes the
 *  record stride from its arena_offset). */
RAILYARD_API int railyard_expert_fetch_batch(railyard_expert* h, const railyard_expert_record* records, size_t count);
/** Switches checksum verification on (non-zero) or off for later fetches. */
RAILYARD_API int railyard_expert_set_verify(railyard_expert* h, int verify_checksums);
/** Sends a polite shutdown to the peer, deregisters the arena and frees the handle
 *  (NULL is a no-op). Returns the shutdown's outcome: 0 also for a handle that had
 *  failed (nothing is sent; its failure was returned by the call that failed). The
 *  handle is freed either way. */
RAILYARD_API int railyard_expert_close(railyard_expert* h);
/** The calling thread's last railyard_expert_* call's failure as a sentence, or ""
 *  when that call succeeded (each call sets it); valid until the thread's next call. */
RAILYARD_API const char* railyard_expert_last_error(void);
/** "OUT_OF_RANGE", ... for a cause; "UNKNOWN" for other values. */
RAILYARD_API const char* railyard_expert_error_name(int code);

/* ---- Snapshot tier: railyard_snapshot_* ------------------------------------------
 * Fixed-size state blobs (SSM snapshots, KV blocks) spilled to a peer host's memory
 * and, behind it, the peer's local disk: an arena of one kind served by
 * `railyardd --snapshot-arena kind=K,mode=raw|paging,blob=BYTES,slots=N`.
 * Raw mode: the caller owns the arena and writes/reads whole blobs at offsets.
 * Paging mode: the peer owns residency; blobs are stored and fetched by a 64-bit
 * key, evicted to the peer's swap file (RAILYARD_SWAP_DIR) when memory runs out and
 * faulted back on get. Data moves with one-sided fabric Writes/Reads over every
 * rail through a registered staging buffer, or, for host memory NCCL's regMr of
 * this process already registered (in the plugin's shared Domain), straight from
 * and into the caller's buffer with no staging copy; every call completes before it
 * returns (after put, the blob is in the peer's arena or swap; durably with
 * RAILYARD_SWAP_SYNC=1 on the peer).
 *
 * Return values: 0 on success, else a railyard error code equal to ncclResult_t
 * (2 system/network error, 4 invalid argument, 5 invalid usage, 6 remote error);
 * railyard_snapshot_last_error() then says what failed, and a call that succeeds
 * (close included) clears it. At connect: 4 for a NULL argument, a bad mode, port 0
 * or a host name that does not resolve; 5 for a RAILYARD_* variable that does not
 * parse (the message names it) or an arena the peer refuses; 6 for a port that is
 * not a snapshot peer's (an expert store's is named so); 2 when nobody answers. Calls on one handle from
 * several threads are safe and run one at a time (a lock serialises them; each waits
 * for the one before); different handles are independent. After a network error a handle stays failed: close it.
 * A handle may rest between calls as long as its owner likes; a client that stops in
 * the middle of a call for RAILYARD_TIMEOUT_MS (the peer's) loses that call, and its
 * arena slots go back to the others. When more clients move blobs at once than a
 * paging arena has slots, a put or get waits for a slot rather than failing at once:
 * the peer queues it, first come first served, up to twice its RAILYARD_TIMEOUT_MS
 * (then the call fails with 5, "give the arena more slots", and the handle stays
 * usable), saying so meanwhile every quarter of the shorter of its and this process's
 * RAILYARD_TIMEOUT_MS (sent at connect; at most every second, at least every 10 ms):
 * this process keeps waiting while it hears that, and calls the peer silent after its
 * own RAILYARD_TIMEOUT_MS without a word. A put's commit, a get or a remove of a key
 * another client's get is reading back from the peer's swap file waits for that read,
 * hearing the same meanwhile. railyard_snapshot_connect brings the fabric connection up
 * before it returns, so a handle may also wait as long as it likes before its first
 * call. */

/** Opaque connection to one arena of one peer. */
typedef struct railyard_snapshot railyard_snapshot_t;

/** Arena modes (the handshake's mode). */
#define RAILYARD_SNAPSHOT_RAW 1
#define RAILYARD_SNAPSHOT_PAGING 2

/** Connects to the arena `kind` (1..31 bytes of [A-Za-z0-9_.-]) served at
 *  `host` (an IPv4 dotted quad, or a name resolved to its first IPv4 address) : `port`,
 *  or, with `host` "host:NAME" (port ignored),
 *  by the host called NAME in the cabling graph, through railyardd's snapshot tunnel
 *  there (RAILYARD_TIER_TUNNEL_PORT + 1), relayed when there is no cable (see
 *  railyard_expert_open; errors there are 2, or 5 for a host not in the graph). `mode`, `arena_bytes` (slots x blob bytes)
 *  and `blob_bytes` must equal the peer's arena: the peer refuses anything else
 *  naming what differs (returns 5). On success `*out` is a new handle; on failure NULL. */
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
 *  checked against the blob's XXH3-64 (6 on a mismatch). On any error the contents
 *  of `buf` are unspecified (part of the blob may have landed). */
RAILYARD_API int railyard_snapshot_get(railyard_snapshot_t* s, unsigned long long key, void* buf,
                                       unsigned long long bytes, int* found);
/** One blob of a snapshot batch (railyard_snapshot_put_batch, _get_batch). */
typedef struct railyard_snapshot_blob {
  unsigned long long key;   /**< in: the blob's key */
  void* data;               /**< in: put: the blob to store (only read); get: where it lands */
  unsigned long long bytes; /**< in: must equal the blob bytes */
  int found;                /**< out, get: 1 when the peer held the key, else 0 (data untouched);
                                 `data` holds the blob only where `result` is 0 */
  int result;               /**< out: 0 done, an error code (as the call returns) for this blob,
                                 or RAILYARD_SNAPSHOT_NOT_ATTEMPTED; a blob that made the batch
                                 be refused before anything was sent (NULL data, a wrong
                                 size) has 4 and the others NOT_ATTEMPTED */
} railyard_snapshot_blob_t;
/** A batch blob's `result` when the batch ended (the handle failed) or was refused
 *  before it reached that blob: nothing of it was sent, or what was took nothing. */
#define RAILYARD_SNAPSHOT_NOT_ATTEMPTED (-1)
/** Paging mode: stores `count` blobs as railyard_snapshot_put would, with two in
 *  flight at once (at most half the arena's slots), so a batch does not pay a control
 *  round trip per blob: at 1 MiB one blob after the other spends about as long on those
 *  as on the bytes. A key given twice is stored twice, the later wins; blobs of
 *  different keys may be stored out of order (a blob the peer had no slot for is asked
 *  again after the ones in flight), so after a failed handle the NOT_ATTEMPTED blobs are
 *  not always the last ones: each blob's result says which were stored. Each
 *  blob's `result` says what became of it; one blob's failure (a full swap disk) does
 *  not stop the others, a failed handle (network) ends the batch. Returns 0 when every
 *  blob was stored, else the first failing blob's code (last_error names its index and
 *  key; when the handle failed, the first blob failed so). 4 with nothing sent for a
 *  NULL handle, a NULL `blobs` (count > 0), a NULL data or a wrong size anywhere in the
 *  batch (that blob's result 4, the others NOT_ATTEMPTED); 5 on a raw arena; on a handle
 *  failed earlier, its code with every blob NOT_ATTEMPTED. When the peer has no free
 *  slot for a blob asked ahead (other clients hold the rest), that blob is asked for
 *  again alone once the earlier ones are done: clients batching at once queue for
 *  slots. */
RAILYARD_API int railyard_snapshot_put_batch(railyard_snapshot_t* s, railyard_snapshot_blob_t* blobs, size_t count);
/** Paging mode: fetches `count` blobs as railyard_snapshot_get would, in order, two
 *  in flight (the peer finds or faults the next while this one moves). A key the peer
 *  does not hold is not an error: its `found` is 0. Results and errors as
 *  railyard_snapshot_put_batch. */
RAILYARD_API int railyard_snapshot_get_batch(railyard_snapshot_t* s, railyard_snapshot_blob_t* blobs, size_t count);
/** Paging mode: forgets `key`; `*found` (may be NULL) says whether it was there. */
RAILYARD_API int railyard_snapshot_remove(railyard_snapshot_t* s, unsigned long long key, int* found);
/** Raw mode: writes one whole blob (`bytes` = blob bytes) at `offset` (a multiple of
 *  the blob bytes inside the arena); 4 and nothing written otherwise. */
RAILYARD_API int railyard_snapshot_write_at(railyard_snapshot_t* s, unsigned long long offset, const void* data,
                                            unsigned long long bytes);
/** Raw mode: reads the whole blob at `offset` into `buf`; checks as write_at. */
RAILYARD_API int railyard_snapshot_read_at(railyard_snapshot_t* s, unsigned long long offset, void* buf,
                                           unsigned long long bytes);
/** Registers `bytes` of host memory at `buf` for this handle's transfers, through the
 *  process's registration cache (memory NCCL's regMr of this process already
 *  registered in the same Domain is not registered or pinned again): a put from, or
 *  a get or read into, a blob lying wholly inside it moves with no staging copy.
 *  Held until railyard_snapshot_deregister(s, buf) or railyard_snapshot_close; the
 *  memory must stay mapped until then. 4 for a NULL handle or buffer or 0 bytes; 5 for
 *  a `buf` registered on this handle already; the Domain's own errors otherwise (over
 *  verbs, 2 when the memory cannot be pinned). */
RAILYARD_API int railyard_snapshot_register(railyard_snapshot_t* s, void* buf, unsigned long long bytes);
/** Releases what railyard_snapshot_register(s, buf, ...) registered (the memory is
 *  deregistered when no one else, NCCL included, still holds it). 4 for a `buf` not
 *  registered on this handle (nothing is released). */
RAILYARD_API int railyard_snapshot_deregister(railyard_snapshot_t* s, void* buf);
/** Closes the connection (uncommitted puts are dropped by the peer) and releases what
 *  railyard_snapshot_register registered on it. NULL is fine. One call running on the
 *  handle in another thread is waited for; no other call may be waiting on the handle
 *  or start on it once close began (as with free()). */
RAILYARD_API void railyard_snapshot_close(railyard_snapshot_t* s);
/** The message of this thread's last railyard_snapshot_* call: what failed, or "" when
 *  it succeeded (each call sets it); valid until this thread's next call. */
RAILYARD_API const char* railyard_snapshot_last_error(void);
/** One arena a peer serves (railyard_snapshot_list). */
typedef struct railyard_snapshot_arena {
  char kind[32];                  /**< NUL-terminated, 1..31 bytes */
  int mode;                       /**< RAILYARD_SNAPSHOT_RAW or RAILYARD_SNAPSHOT_PAGING */
  unsigned long long blob_bytes;  /**< bytes per blob */
  unsigned long long arena_bytes; /**< slots x blob bytes; 0: a raw arena the first client sizes */
  unsigned long long max_bytes;   /**< for such an arena the largest size allowed, else 0 */
} railyard_snapshot_arena_t;
/** Discovery: asks the peer at `host` : `port` (or, with `host` "host:NAME", port
 *  ignored, the host called NAME through railyardd's snapshot tunnel there, as
 *  railyard_snapshot_connect) which arenas (kinds of blob) it serves.
 *  Fills up to `max` entries of `out` and sets `*count` to the number the peer has
 *  (which may exceed `max`: call again with more room). 0 on success; 6 when the peer
 *  sends a bad list, 5 when it refuses (a peer older than discovery), 2 on network errors;
 *  for "host:NAME", 4 for a malformed NAME and 5 for a host not in the cabling graph or no
 *  fabric rail here (as railyard_snapshot_connect). */
RAILYARD_API int railyard_snapshot_list(const char* host, unsigned short port, railyard_snapshot_arena_t* out,
                                        int max, int* count);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* RAILYARD_RAILYARD_H_ */
