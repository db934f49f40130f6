// Writes a store directory safely: layer files and manifest.json go into a sibling
// temporary directory ("<dir>.partial-<host>-<pid>") that is renamed to `dir` only once
// everything is written and synced, so nothing half-written ever looks like a store.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "env/status.h"
#include "storage/expert/manifest.h"

namespace railyard::expert {

/// Fills one record: layer index `i`, `expert`, into `dst` (manifest.recordStride
/// bytes, zeroed beforehand). Returns a Status (errors abort the write).
using RecordFiller = std::function<Status(size_t layerIndex, uint64_t expert, char* dst)>;
/// Called after each record with (records done, records in all).
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

/// The temporary directory WriteStore writes `dir` into, in this process:
/// "<dir>.partial-<host name>-<pid>" ('/' and '-' in the host name read as '_'), so a
/// run on another host sharing the file system is told apart from a dead one here.
std::string PartialDirOf(const std::string& dir);

/// Writes the store described by `manifest` (layers' files and checksums are filled in
/// here: files "layer-NNNN.bin" unless set, checksums computed from the records).
/// INVALID_ARGUMENT when `dir` already exists; SYSTEM for I/O errors (the temporary
/// directory is removed); the filler's errors as they are.
Status WriteStore(const std::string& dir, Manifest manifest, const RecordFiller& fill, const ProgressFn& progress = {});

}  // namespace railyard::expert
