// One compilation of XXH3-64 for xxh3_kernels.h: included once by each kernel file,
// after it defines RAILYARD_XXH3_KERNEL_FN (the accessor's name) and
// RAILYARD_XXH3_KERNEL_NAME. xxHash picks its vector code from that file's compiler
// flags (XXH_VECTOR: __AVX512F__, __AVX2__, SSE2, NEON); XXH_INLINE_ALL keeps every
// xxHash function local to the file, so the three compilations do not collide.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "storage/checksum/xxh3_kernels.h"

namespace railyard::checksum {
namespace {

uint64_t KernelOneShot(const void* p, size_t n) { return XXH3_64bits(p, n); }
void* KernelCreate() {
  XXH3_state_t* s = XXH3_createState();
  if (s != nullptr) XXH3_64bits_reset(s);
  return s;
}
void KernelFree(void* s) { XXH3_freeState(static_cast<XXH3_state_t*>(s)); }
void KernelReset(void* s) { XXH3_64bits_reset(static_cast<XXH3_state_t*>(s)); }
void KernelUpdate(void* s, const void* p, size_t n) { XXH3_64bits_update(static_cast<XXH3_state_t*>(s), p, n); }
uint64_t KernelDigest(const void* s) { return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(s)); }

}  // namespace

const Xxh3Kernels& RAILYARD_XXH3_KERNEL_FN() {
  static const Xxh3Kernels k{RAILYARD_XXH3_KERNEL_NAME, KernelOneShot, KernelCreate, KernelFree,
                             KernelReset,               KernelUpdate,  KernelDigest};
  return k;
}

}  // namespace railyard::checksum
