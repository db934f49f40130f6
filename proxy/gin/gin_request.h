// A request handed to NCCL by iput / iputSignal / iget / iflush: never NULL, done
// when every fabric op it posted has completed locally (kDone), failed when one
// failed (the comm is then poisoned).
#pragma once

#include <chrono>
#include <cstdint>

#include "env/status.h"

namespace railyard::gin {

/// Which call made a request (for error messages).
enum class RequestKind : uint8_t { kPut, kPutSignal, kGet, kFlush };

/// "iput", "iputSignal", "iget", "iflush".
const char* RequestKindName(RequestKind kind);

/// One outstanding request. Owned by its comm until test() reports it done.
struct Request {
  uint64_t magic = kMagic;      ///< kMagic while live (test checks it before use)
  RequestKind kind = RequestKind::kPut;
  uint32_t peer = 0;            ///< target rank
  uint64_t seq = 0;             ///< per-peer sequence number (1, 2, ...), named in errors
  int pendingOps = 0;           ///< fabric ops not yet completed
  uint64_t flushUntil = 0;      ///< kFlush: done once every request numbered below this is done
  uint64_t number = 0;          ///< comm-wide request number
  std::chrono::steady_clock::time_point posted;

  static constexpr uint64_t kMagic = 0x5259474e52455121ull;  // "RYGNREQ!"
};

}  // namespace railyard::gin
