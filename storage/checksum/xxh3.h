// XXH3-64 (xxHash's XXH3_64bits, seed 0) at the widest vector width this CPU has:
// the checksum of the expert tier's records and of the snapshot tier's blobs and
// swap records. Every kernel gives the same value for the same bytes (xxHash's spec,
// doc/xxhash_spec.md: the vector width changes how the sum is computed, not what);
// tests/checksum checks each against Debian's libxxhash.
#pragma once

#include <cstdint>
#include <memory>

namespace railyard::checksum {

/// XXH3-64 of [p, p + n) (n bytes; p may be null when n is 0). Thread-safe.
uint64_t Xxh3(const void* p, uint64_t n);

/// The kernel Xxh3 and Xxh3Stream use in this process: "avx512", "avx2", "sse2" (x86-64)
/// or "portable" (xxHash's choice for the build's target: NEON on aarch64). Chosen
/// once, at the first call, from the CPU (and whether the OS saves its vector state:
/// GCC's __builtin_cpu_supports asks both) and RAILYARD_XXH3_KERNEL (env/config.h).
const char* Xxh3Kernel();

/// XXH3-64 of bytes given in pieces, in order: the same value as Xxh3 of them all in
/// one. Not copyable; one thread at a time.
class Xxh3Stream {
 public:
  /// A stream of no bytes yet. Throws std::bad_alloc when its state cannot be allocated.
  Xxh3Stream();
  ~Xxh3Stream();
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  /// Back to no bytes.
  void Reset();
  /// Appends [p, p + n).
  void Update(const void* p, uint64_t n);
  /// The XXH3-64 of every byte appended since construction or Reset; the stream may go on.
  uint64_t Digest() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace railyard::checksum
