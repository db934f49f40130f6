// The XXH3-64 kernels behind xxh3.h: the same xxHash code compiled once per vector
// width (xxh3_kernel_body.h), each file with its own compiler flags. Internal to
// storage/checksum and its tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace railyard::checksum {

/// One compilation of XXH3-64. The state is xxHash's XXH3_state_t, whose layout does
/// not depend on the vector width; a state is still only ever used with the kernel
/// that created it.
struct Xxh3Kernels {
  const char* name;                                ///< "sse2", "avx2", "avx512", "portable"
  uint64_t (*oneShot)(const void* p, size_t n);    ///< XXH3_64bits
  void* (*createState)();                          ///< XXH3_createState, reset; null when out of memory
  void (*freeState)(void* state);                  ///< XXH3_freeState
  void (*reset)(void* state);                      ///< XXH3_64bits_reset
  void (*update)(void* state, const void* p, size_t n);  ///< XXH3_64bits_update
  uint64_t (*digest)(const void* state);           ///< XXH3_64bits_digest
};

/// The kernel of the build's own target flags (SSE2 on x86-64, NEON on aarch64).
const Xxh3Kernels& Xxh3PortableKernels();
#if RAILYARD_XXH3_X86_KERNELS
const Xxh3Kernels& Xxh3Avx2Kernels();    ///< compiled with -mavx2; call only where the CPU has AVX2
const Xxh3Kernels& Xxh3Avx512Kernels();  ///< compiled with -mavx512f; only where the CPU has AVX-512F
#endif

/// The kernels this CPU can run, widest first (at least the portable one).
/// `count` gets how many; the array lives for the process.
const Xxh3Kernels* const* Xxh3RunnableKernels(int* count);

/// The kernel RAILYARD_XXH3_KERNEL's value `wanted` asks for among `runnable` (`count`
/// of them, widest first, the build's own last): "auto" the first, "portable" the last,
/// another name the kernel of that name. A name none of them has (the CPU cannot run it,
/// or an unknown one) gets the first, and `*note` says so (else it is left empty).
const Xxh3Kernels& ChooseXxh3Kernel(std::string_view wanted, const Xxh3Kernels* const* runnable, int count,
                                    std::string* note);

}  // namespace railyard::checksum
