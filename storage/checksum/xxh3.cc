// xxh3.h: the portable kernel (this file's own flags) and the choice of kernel.
#if defined(__x86_64__)
#define RAILYARD_XXH3_KERNEL_NAME "sse2"
#else
#define RAILYARD_XXH3_KERNEL_NAME "portable"
#endif
#define RAILYARD_XXH3_KERNEL_FN Xxh3PortableKernels
#include "storage/checksum/xxh3_kernel_body.h"

#include <new>
#include <string>

#include "env/config.h"
#include "env/log.h"

#include "storage/checksum/xxh3.h"

namespace railyard::checksum {
namespace {

/// The widest first; built once, thread-safe (a function-local static).
struct Runnable {
  const Xxh3Kernels* kernels[3] = {};
  int count = 0;
  Runnable() {
#if RAILYARD_XXH3_X86_KERNELS
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) kernels[count++] = &Xxh3Avx512Kernels();
    if (__builtin_cpu_supports("avx2")) kernels[count++] = &Xxh3Avx2Kernels();
#endif
    kernels[count++] = &Xxh3PortableKernels();
  }
};

const Runnable& RunnableSet() {
  static const Runnable r;
  return r;
}

/// RAILYARD_XXH3_KERNEL's choice (auto when the configuration does not parse: whoever
/// loads it reports that), told once.
const Xxh3Kernels& ChooseFromConfig() {
  const env::Config* config = nullptr;
  const std::string wanted = env::Load(&config).ok() ? config->xxh3Kernel : "auto";
  std::string note;
  const Xxh3Kernels& k = ChooseXxh3Kernel(wanted, RunnableSet().kernels, RunnableSet().count, &note);
  if (!note.empty()) RY_WARN("%s", note.c_str());
  RY_INFO(log::kEnv, "XXH3-64 checksums: the %s kernel (RAILYARD_XXH3_KERNEL=%s)", k.name, wanted.c_str());
  return k;
}

const Xxh3Kernels& Chosen() {
  static const Xxh3Kernels& k = ChooseFromConfig();
  return k;
}

}  // namespace

const Xxh3Kernels& ChooseXxh3Kernel(std::string_view wanted, const Xxh3Kernels* const* runnable, int count,
                                    std::string* note) {
  if (wanted == "auto") return *runnable[0];
  if (wanted == "portable") return *runnable[count - 1];
  for (int i = 0; i < count; ++i) {
    if (wanted == runnable[i]->name) return *runnable[i];
  }
  std::string have;
  for (int i = 0; i < count; ++i) have += std::string(i > 0 ? ", " : "") + runnable[i]->name;
  *note = "RAILYARD_XXH3_KERNEL=" + std::string(wanted) + ": this CPU runs only " + have + "; using " +
          runnable[0]->name;
  return *runnable[0];
}

const Xxh3Kernels* const* Xxh3RunnableKernels(int* count) {
  *count = RunnableSet().count;
  return RunnableSet().kernels;
}

uint64_t Xxh3(const void* p, uint64_t n) { return Chosen().oneShot(p, n); }

const char* Xxh3Kernel() { return Chosen().name; }

struct Xxh3Stream::State {
  const Xxh3Kernels* k;
  void* s;
};

Xxh3Stream::Xxh3Stream() : state_(new State{&Chosen(), nullptr}) {
  state_->s = state_->k->createState();
  if (state_->s == nullptr) throw std::bad_alloc();
}

Xxh3Stream::~Xxh3Stream() { state_->k->freeState(state_->s); }

void Xxh3Stream::Reset() { state_->k->reset(state_->s); }

void Xxh3Stream::Update(const void* p, uint64_t n) { state_->k->update(state_->s, p, n); }

uint64_t Xxh3Stream::Digest() const { return state_->k->digest(state_->s); }

}  // namespace railyard::checksum
