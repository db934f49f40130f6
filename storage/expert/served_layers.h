// The bytes a READ peer serves: its own copy of every layer file, registered once for
// remote read on every rail of the Domain.
//
// Why a copy, not the file's mapping: clients' Reads must never reach memory that the
// store changing under the peer can take away or rewrite.
// - A mapping of a file (MAP_SHARED or MAP_PRIVATE) that is truncated raises SIGBUS on
//   any CPU access past the new end: the TCP fabric's target reads a Region with the
//   CPU, so one Read inside the window before the peer's periodic check withdrew the
//   registration killed the peer. No mmap flag prevents that, and a SIGBUS handler is
//   not sound in a library.
// - On verbs the MR pins the page-cache pages, so the HCA cannot fault, but an in-place
//   rewrite still shows through (torn records: caught only while the client verifies
//   checksums) and a truncation zeroes the tail of the page at the new end in place.
// - A read lease (fcntl F_SETLEASE) only delays the writer by lease-break-time (45 s by
//   default, then it proceeds), is delivered as a signal, needs the file's owner or
//   CAP_LEASE and is missing on NFS and overlayfs.
// The copy costs what registering the mapping on verbs costs (the whole store resident
// and pinned; the PinLedger charges it either way), one copy per byte at load on top of
// the file read the registration needed anyway, and no page cache (dropped with
// POSIX_FADV_DONTNEED as it is read). Its bytes never change while registered: a Read
// returns the record as it was loaded, or fails once the peer withdraws the
// registration after noticing the change (STORE_CHANGED). The copy is made read-only
// (mprotect PROT_READ) before it is registered (remote read only, no local write), so
// even the peer cannot write it.
#pragma once

#include <memory>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/domain.h"
#include "storage/expert/store.h"

namespace railyard::expert {

/// The registered copies of every layer file of a Store. Not thread-safe; the owner
/// serialises Load, destruction and key lookups.
class ServedLayers {
 public:
  /// Reads every layer file of `store` into a private anonymous mapping of its own
  /// (LayerFileBytes each), makes it read-only and registers it on `domain` with
  /// kAccessRemoteRead. Each file is checked (Store::CheckLayer) before and after it is
  /// read, so a file changed during the load is STORE_CHANGED and nothing is served;
  /// a short read is STORE_CHANGED too; SYSTEM for mmap/pread failures; the Domain's
  /// error (as SYSTEM) when it refuses the registration. Nothing stays mapped or
  /// registered on error. `domain` must outlive the result.
  static Status Load(const Store& store, fabric::Domain& domain, std::unique_ptr<ServedLayers>* out);
  /// Deregisters every Region (after which no Read reaches the copy), then unmaps it.
  ~ServedLayers();
  ServedLayers(const ServedLayers&) = delete;
  ServedLayers& operator=(const ServedLayers&) = delete;

  /// Layers served (= manifest().layers.size()).
  size_t size() const { return regions_.size(); }
  /// The Region of layer index `i` (< size()).
  const fabric::Region* region(size_t i) const { return regions_[i]; }
  /// Base address of layer index `i`'s copy (for tests).
  const void* bytes(size_t i) const { return maps_[i]; }

 private:
  ServedLayers(fabric::Domain& domain, uint64_t layerBytes) : domain_(domain), layerBytes_(layerBytes) {}
  fabric::Domain& domain_;
  uint64_t layerBytes_;
  std::vector<void*> maps_;
  std::vector<const fabric::Region*> regions_;
};

}  // namespace railyard::expert
