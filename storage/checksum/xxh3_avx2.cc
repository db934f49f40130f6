// XXH3-64 compiled with -mavx2 (storage/checksum/CMakeLists.txt): xxh3.cc calls it only
// where the CPU and OS run AVX2.
#define RAILYARD_XXH3_KERNEL_FN Xxh3Avx2Kernels
#define RAILYARD_XXH3_KERNEL_NAME "avx2"
#include "storage/checksum/xxh3_kernel_body.h"
