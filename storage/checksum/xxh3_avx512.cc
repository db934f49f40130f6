// XXH3-64 compiled with -mavx512f (storage/checksum/CMakeLists.txt): xxh3.cc calls it
// only where the CPU and OS run AVX-512F.
#define RAILYARD_XXH3_KERNEL_FN Xxh3Avx512Kernels
#define RAILYARD_XXH3_KERNEL_NAME "avx512"
#include "storage/checksum/xxh3_kernel_body.h"
