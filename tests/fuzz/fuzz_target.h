// Shared by every fuzz target (tests/fuzz/<target>_fuzz.cc): how a target is
// declared, and the checks a target makes on what a decoder returns.
//
// Each target is one function `bool <Name>OneInput(const uint8_t*, size_t)` that
// feeds the bytes to Railyard's real decoders and checks their answer; it returns
// true when the input was accepted (decoded, or drove the code to a success) and
// false when it was cleanly refused. A crash, a sanitizer report or a failed
// FUZZ_CHECK is a finding. The same function is called by libFuzzer (the
// RAILYARD_FUZZ=ON clang build defines RAILYARD_LIBFUZZER and gets the
// LLVMFuzzerTestOneInput entry below) and by the gcc replay test
// (fuzz_replay_test.cc), which runs every committed corpus and regression file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "env/status.h"

namespace railyard::fuzz {

/// Reports a broken invariant and aborts (libFuzzer then saves the input).
[[noreturn]] inline void CheckFailed(const char* file, int line, const char* what) {
  std::fprintf(stderr, "FUZZ_CHECK failed at %s:%d: %s\n", file, line, what);
  std::abort();
}

/// Reads the input front to back; short reads give zeros, so every input is usable.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(data), left_(size) {}
  /// Copies up to `n` bytes into `out`, zero-filling what the input lacks.
  void Bytes(void* out, size_t n) {
    const size_t k = n < left_ ? n : left_;
    if (k > 0) std::memcpy(out, p_, k);
    if (k < n) std::memset(static_cast<char*>(out) + k, 0, n - k);
    p_ += k;
    left_ -= k;
  }
  template <typename T>
  T Take() {
    T v{};
    Bytes(&v, sizeof v);
    return v;
  }
  /// The next `n` bytes (fewer at the end) as a pointer into the input.
  const uint8_t* Span(size_t n, size_t* got) {
    *got = n < left_ ? n : left_;
    const uint8_t* s = p_;
    p_ += *got;
    left_ -= *got;
    return s;
  }
  size_t left() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

/// A refusal must say why: an error Status with a message.
inline void CheckRefusal(const Status& s, const char* file, int line) {
  if (s.ok() || s.message().empty()) CheckFailed(file, line, "a refusal without an error message");
}

}  // namespace railyard::fuzz

#define FUZZ_CHECK(cond) \
  ((cond) ? (void)0 : ::railyard::fuzz::CheckFailed(__FILE__, __LINE__, #cond))
#define FUZZ_CHECK_REFUSAL(status) ::railyard::fuzz::CheckRefusal((status), __FILE__, __LINE__)

/// Declares target `Name`: defines `bool railyard::fuzz::NameOneInput(const uint8_t*,
/// size_t)` with the body that follows, and in the libFuzzer build the entry point.
#ifdef RAILYARD_LIBFUZZER
#define RAILYARD_FUZZ_TARGET(Name)                                                     \
  namespace railyard::fuzz {                                                          \
  bool Name##OneInput(const uint8_t* data, size_t size);                              \
  }                                                                                   \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {          \
    (void)::railyard::fuzz::Name##OneInput(data, size);                               \
    return 0;                                                                         \
  }                                                                                   \
  bool ::railyard::fuzz::Name##OneInput(const uint8_t* data, size_t size)
#else
#define RAILYARD_FUZZ_TARGET(Name)                                                     \
  namespace railyard::fuzz {                                                          \
  bool Name##OneInput(const uint8_t* data, size_t size);                              \
  }                                                                                   \
  bool ::railyard::fuzz::Name##OneInput(const uint8_t* data, size_t size)
#endif
