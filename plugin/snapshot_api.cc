// The snapshot tier's C API (include/railyard/railyard.h, railyard_snapshot_*):
// each handle is a lease on the process's shared fabric (plugin/snapshot_runtime.h),
// a Worker of its Domain and a storage::snapshot::SnapshotClient, behind a lock so one
// thread at a time drives the Worker.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <regex>
#include <string>
#include <vector>

#include "env/config.h"
#include "plugin/snapshot_runtime.h"
#include "plugin/tier_route.h"
#include "railyard/railyard.h"
#include "storage/snapshot/snapshot_client.h"

struct railyard_snapshot {
  std::mutex mu;
  railyard::runtime::FabricLease lease;  ///< the shared Domain and cache
  std::unique_ptr<railyard::fabric::Worker> worker;
  std::unique_ptr<railyard::plugin::TierRoute> route;  ///< host:NAME peers: tunnel and Worker
  std::unique_ptr<railyard::storage::snapshot::SnapshotClient> client;
  railyard::fabric::RegistrationCache* cache = nullptr;  ///< the client's (the lease's or the tunnel's)
  std::map<const void*, const railyard::fabric::Region*> registered;  ///< railyard_snapshot_register, by buffer
  ~railyard_snapshot() {
    client.reset();  // before its Worker (releases the staging buffer)
    for (const auto& [buf, region] : registered) (void)cache->Release(region);
    worker.reset();  // before the lease's Domain may go
    route.reset();
    railyard::runtime::ReleaseProcessFabric(&lease);
  }
};

namespace {

thread_local std::string t_lastError;

/// `message` with the snapshot client's C++ call names in this API's: the client says
/// "snapshot: Put on raw kind 'kv' (use WriteAt)", a C caller reads
/// "railyard_snapshot_put on raw kind 'kv' (use railyard_snapshot_write_at)".
std::string CNames(const std::string& message) {
  static const std::regex kCall(R"((snapshot: |use )(WriteAt|ReadAt|PutBatch|GetBatch|Put|Get|Remove)\b)");
  static const std::map<std::string, std::string> kNames = {
      {"WriteAt", "write_at"}, {"ReadAt", "read_at"}, {"PutBatch", "put_batch"}, {"GetBatch", "get_batch"},
      {"Put", "put"},          {"Get", "get"},        {"Remove", "remove"}};
  std::string out;
  auto at = message.cbegin();
  for (std::sregex_iterator m(message.begin(), message.end(), kCall), end; m != end; ++m) {
    out.append(at, (*m)[0].first);
    out += ((*m)[1] == "use " ? "use " : "") + std::string("railyard_snapshot_") + kNames.at((*m)[2]);
    at = (*m)[0].second;
  }
  out.append(at, message.cend());
  return out;
}

int Fail(const railyard::Status& s) {
  t_lastError = CNames(s.message());
  return s.ncclResult();
}

/// "0x7f8a5c000000": a buffer as debuggers and /proc/PID/maps show it.
std::string AddressText(const void* p) {
  char b[24];
  std::snprintf(b, sizeof b, "%p", p);
  return b;
}

int Done(const railyard::Status& s) {
  if (!s.ok()) return Fail(s);
  t_lastError.clear();
  return 0;
}

/// Opens `route` to the snapshot tunnel of the host called `hostName` (railyardd's
/// RAILYARD_TIER_TUNNEL_PORT + 1 there, relayed when there is no cable); `*localPort` is
/// where on 127.0.0.1 the tier client connects. Errors name `call` and `host` ("host:h2").
railyard::Status OpenSnapshotTunnel(const char* call, const char* host, const std::string& hostName,
                                    const railyard::env::Config& cfg, railyard::plugin::TierClientFabric** fabric,
                                    railyard::plugin::TierRoute* route, uint16_t* localPort) {
  using namespace railyard;
  Status s = plugin::TierClientFabric::Get(fabric);
  if (s.ok()) s = (*fabric)->Open(hostName, static_cast<uint16_t>(cfg.tierTunnelPort + 1), route);
  if (!s.ok()) return Status(s.code(), std::string(call) + " " + host + ": " + s.message());
  const std::string local = route->local();
  *localPort = static_cast<uint16_t>(std::stoi(local.substr(local.rfind(':') + 1)));
  return Status::Ok();
}

/// railyard_snapshot_put_batch and _get_batch: the C blobs as the client's, and back.
int Batch(railyard_snapshot_t* s, railyard_snapshot_blob_t* blobs, size_t count, bool put) {
  using namespace railyard;
  const char* call = put ? "railyard_snapshot_put_batch" : "railyard_snapshot_get_batch";
  if (blobs == nullptr && count > 0) {
    return Fail(InvalidArgument(std::string(call) + ": NULL blobs with a count of " + std::to_string(count)));
  }
  for (size_t i = 0; i < count; ++i) {
    blobs[i].found = 0;
    blobs[i].result = RAILYARD_SNAPSHOT_NOT_ATTEMPTED;
  }
  if (s == nullptr) return Fail(InvalidArgument(std::string(call) + ": NULL handle"));
  std::vector<storage::snapshot::BatchBlob> batch;
  try {
    batch.resize(count);
  } catch (const std::bad_alloc&) {
    return Fail(SystemError(std::string(call) + ": out of memory for a batch of " + std::to_string(count) + " blobs"));
  }
  for (size_t i = 0; i < count; ++i) {
    batch[i].key = blobs[i].key;
    batch[i].data = blobs[i].data;
    batch[i].bytes = blobs[i].bytes;
  }
  std::lock_guard<std::mutex> lock(s->mu);
  const Status st = put ? s->client->PutBatch(batch) : s->client->GetBatch(batch);
  for (size_t i = 0; i < count; ++i) {
    blobs[i].found = batch[i].found ? 1 : 0;
    // A blob that failed the batch's checks has its code though it was never sent.
    blobs[i].result = !batch[i].status.ok() ? batch[i].status.ncclResult()
                      : batch[i].attempted  ? 0
                                            : RAILYARD_SNAPSHOT_NOT_ATTEMPTED;
  }
  return Done(st);
}

}  // namespace

extern "C" {

int railyard_snapshot_connect(const char* host, unsigned short port, const char* kind, int mode,
                              unsigned long long arena_bytes, unsigned long long blob_bytes,
                              railyard_snapshot_t** out) {
  using namespace railyard;
  if (out != nullptr) *out = nullptr;  // as railyard_expert_open: a failed connect leaves NULL (C API trial)
  if (host == nullptr || kind == nullptr || out == nullptr) {
    return Fail(InvalidArgument("railyard_snapshot_connect: host, kind and out must not be NULL"));
  }
  if (mode != RAILYARD_SNAPSHOT_RAW && mode != RAILYARD_SNAPSHOT_PAGING) {
    return Fail(InvalidArgument("railyard_snapshot_connect: mode " + std::to_string(mode) +
                                " (RAILYARD_SNAPSHOT_RAW = 1 or RAILYARD_SNAPSHOT_PAGING = 2)"));
  }
  const env::Config* cfg = nullptr;
  if (Status s = env::Load(&cfg); !s.ok()) return Fail(s);
  auto h = std::unique_ptr<railyard_snapshot>(new (std::nothrow) railyard_snapshot);
  if (!h) return Fail(SystemError("railyard_snapshot_connect: out of memory"));
  bool byHost = false;
  std::string hostName;
  if (Status s = plugin::ParseTierHost(host, &byHost, &hostName); !s.ok()) return Fail(s);
  if (!byHost && port == 0) {
    // (C API trial: port 0 failed at the dial, as a network error, 2; the expert tier's
    // "host:0" is an invalid argument.)
    return Fail(InvalidArgument("railyard_snapshot_connect: port 0 (give the port railyardd printed as snapshot-port N, "
                                "or host \"host:NAME\")"));
  }
  fabric::RegistrationCache* cache = nullptr;
  fabric::Worker* worker = nullptr;
  storage::snapshot::ClientOptions o;
  if (byHost) {  // through the tunnel to railyardd's snapshot tunnel (RAILYARD_TIER_TUNNEL_PORT + 1); `port` unused
    plugin::TierClientFabric* f = nullptr;
    h->route = std::make_unique<plugin::TierRoute>();
    uint16_t localPort = 0;
    if (Status s = OpenSnapshotTunnel("railyard_snapshot_connect", host, hostName, *cfg, &f, h->route.get(), &localPort);
        !s.ok()) {
      return Fail(s);
    }
    cache = &f->cache();
    worker = h->route->worker.get();
    o.host = "127.0.0.1";
    o.port = localPort;
    o.peerName = h->route->PeerName(host);  // errors name it, not the tunnel's local port
  } else {
    if (Status s = plugin::AcquireSnapshotFabric(host, &h->lease); !s.ok()) return Fail(s);
    cache = h->lease.cache;
    if (Status s = h->lease.domain->CreateWorker(&h->worker); !s.ok()) return Fail(s);
    worker = h->worker.get();
    o.host = host;
    o.port = port;
  }
  o.kind = kind;
  o.mode = static_cast<storage::snapshot::Mode>(mode);
  o.arenaBytes = arena_bytes;
  o.blobBytes = blob_bytes;
  o.timeoutMs = cfg->timeoutMs;
  o.mover.chunkBytes = std::min<uint64_t>(std::max<uint64_t>(cfg->stripeChunkBytes, 4096), 64ull << 20);
  o.mover.chunksPerRail = std::min(std::max(cfg->stripeChunksPerRail, 1), 64);
  h->cache = cache;
  if (Status s = storage::snapshot::SnapshotClient::Connect(*cache, *worker, o, &h->client); !s.ok()) {
    return Fail(h->route ? h->route->WithTunnelFailure(s, host, "--snapshot-arena") : s);  // the control connection only saw a close
  }
  *out = h.release();
  return Done(Status::Ok());
}

int railyard_snapshot_put(railyard_snapshot_t* s, unsigned long long key, const void* data, unsigned long long bytes) {
  if (s == nullptr || data == nullptr) return Fail(railyard::InvalidArgument("railyard_snapshot_put: NULL handle or data"));
  std::lock_guard<std::mutex> lock(s->mu);
  return Done(s->client->Put(key, data, bytes));
}

int railyard_snapshot_get(railyard_snapshot_t* s, unsigned long long key, void* buf, unsigned long long bytes,
                          int* found) {
  if (s == nullptr || buf == nullptr || found == nullptr) {
    return Fail(railyard::InvalidArgument("railyard_snapshot_get: NULL handle, buffer or found"));
  }
  std::lock_guard<std::mutex> lock(s->mu);
  bool f = false;
  const int rc = Done(s->client->Get(key, buf, bytes, &f));
  *found = f ? 1 : 0;
  return rc;
}

int railyard_snapshot_put_batch(railyard_snapshot_t* s, railyard_snapshot_blob_t* blobs, size_t count) {
  return Batch(s, blobs, count, true);
}

int railyard_snapshot_get_batch(railyard_snapshot_t* s, railyard_snapshot_blob_t* blobs, size_t count) {
  return Batch(s, blobs, count, false);
}

int railyard_snapshot_remove(railyard_snapshot_t* s, unsigned long long key, int* found) {
  if (s == nullptr) return Fail(railyard::InvalidArgument("railyard_snapshot_remove: NULL handle"));
  std::lock_guard<std::mutex> lock(s->mu);
  bool f = false;
  const int rc = Done(s->client->Remove(key, &f));
  if (found != nullptr) *found = f ? 1 : 0;
  return rc;
}

int railyard_snapshot_write_at(railyard_snapshot_t* s, unsigned long long offset, const void* data,
                               unsigned long long bytes) {
  if (s == nullptr || data == nullptr) return Fail(railyard::InvalidArgument("railyard_snapshot_write_at: NULL handle or data"));
  std::lock_guard<std::mutex> lock(s->mu);
  return Done(s->client->WriteAt(offset, data, bytes));
}

int railyard_snapshot_read_at(railyard_snapshot_t* s, unsigned long long offset, void* buf, unsigned long long bytes) {
  if (s == nullptr || buf == nullptr) return Fail(railyard::InvalidArgument("railyard_snapshot_read_at: NULL handle or buffer"));
  std::lock_guard<std::mutex> lock(s->mu);
  return Done(s->client->ReadAt(offset, buf, bytes));
}

int railyard_snapshot_register(railyard_snapshot_t* s, void* buf, unsigned long long bytes) {
  using namespace railyard;
  if (s == nullptr || buf == nullptr || bytes == 0) {
    return Fail(InvalidArgument("railyard_snapshot_register: NULL handle or buffer, or 0 bytes"));
  }
  std::lock_guard<std::mutex> lock(s->mu);
  if (s->registered.count(buf) != 0) {
    return Fail(InvalidUsage("railyard_snapshot_register: the buffer at " + AddressText(buf) +
                             " is registered on this handle already (railyard_snapshot_deregister it first)"));
  }
  const fabric::Region* region = nullptr;
  if (Status st = s->cache->Acquire(buf, bytes, fabric::kAccessLocal, fabric::MemoryKind::kHost, &region); !st.ok()) {
    return Fail(Status(st.code(), "railyard_snapshot_register: " + st.message()));
  }
  s->registered.emplace(buf, region);
  return Done(Status::Ok());
}

int railyard_snapshot_deregister(railyard_snapshot_t* s, void* buf) {
  using namespace railyard;
  if (s == nullptr || buf == nullptr) return Fail(InvalidArgument("railyard_snapshot_deregister: NULL handle or buffer"));
  std::lock_guard<std::mutex> lock(s->mu);
  const auto it = s->registered.find(buf);
  if (it == s->registered.end()) {
    return Fail(InvalidArgument("railyard_snapshot_deregister: the buffer at " + AddressText(buf) +
                                " is not registered on this handle (nothing was released)"));
  }
  const Status st = s->cache->Release(it->second);
  s->registered.erase(it);
  return Done(st);
}

void railyard_snapshot_close(railyard_snapshot_t* s) {
  if (s == nullptr) return;
  // A call running on another thread holds the lock: close waits for it to end (new-user
  // trial: a close during a put_many freed the handle under it). No other call may be
  // waiting for the lock or start on the handle once close began: that is a use after
  // free, as with free() (the Python binding serialises close with its calls itself).
  s->mu.lock();
  s->mu.unlock();
  delete s;
  t_lastError.clear();  // as every call that does not fail (C API trial: the last failure stayed)
}

const char* railyard_snapshot_last_error(void) { return t_lastError.c_str(); }

int railyard_snapshot_list(const char* host, unsigned short port, railyard_snapshot_arena_t* out, int max, int* count) {
  using namespace railyard;
  if (max < 0) return Fail(InvalidArgument("railyard_snapshot_list: max must be >= 0, got " + std::to_string(max)));
  if (host == nullptr || count == nullptr || (out == nullptr && max > 0)) {
    return Fail(InvalidArgument("railyard_snapshot_list: host and count must not be NULL, out may be NULL only with max 0"));
  }
  const env::Config* cfg = nullptr;
  if (Status s = env::Load(&cfg); !s.ok()) return Fail(s);
  bool byHost = false;
  std::string hostName;
  if (Status s = plugin::ParseTierHost(host, &byHost, &hostName); !s.ok()) return Fail(s);
  if (!byHost && port == 0) {
    return Fail(InvalidArgument("railyard_snapshot_list: port 0 (give the port railyardd printed as snapshot-port N, "
                                "or host \"host:NAME\")"));
  }
  std::vector<storage::snapshot::ArenaInfo> list;
  if (byHost) {  // through the snapshot tunnel, as railyard_snapshot_connect; `port` unused
    plugin::TierClientFabric* f = nullptr;
    plugin::TierRoute route;
    uint16_t localPort = 0;
    if (Status s = OpenSnapshotTunnel("railyard_snapshot_list", host, hostName, *cfg, &f, &route, &localPort); !s.ok()) {
      return Fail(s);
    }
    if (Status s = storage::snapshot::ListArenas("127.0.0.1", localPort, cfg->timeoutMs, &list, route.PeerName(host));
        !s.ok()) {
      return Fail(route.WithTunnelFailure(s, host, "--snapshot-arena"));
    }
  } else if (Status s = storage::snapshot::ListArenas(host, port, cfg->timeoutMs, &list); !s.ok()) {
    return Fail(s);
  }
  *count = static_cast<int>(list.size());
  for (int i = 0; i < max && i < *count; ++i) {
    railyard_snapshot_arena_t& a = out[i];
    std::memset(&a, 0, sizeof a);
    std::memcpy(a.kind, list[i].kind.data(), std::min<size_t>(list[i].kind.size(), sizeof a.kind - 1));
    a.mode = static_cast<int>(list[i].mode);
    a.blob_bytes = list[i].blobBytes;
    a.arena_bytes = list[i].arenaBytes;
    a.max_bytes = list[i].maxBytes;
  }
  return Done(Status::Ok());
}

}  // extern "C"
