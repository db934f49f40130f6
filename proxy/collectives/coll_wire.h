// What collective peers exchange: the 32-bit immediates of the data stream (a chunk
// landed, credits returned, abort) and the record each rank sends its ring
// neighbours at connect (its rank, the comm's shape and its staging RemoteKey).
// Everything decoded here comes from a peer and is validated.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "env/status.h"
#include "proxy/fabric/remote_key.h"

namespace railyard::collectives {

/// Kinds of immediates (the top two bits).
enum class ImmKind : uint32_t {
  kData = 0,    ///< a chunk landed in staging slot (seq % slots) of the receiver's stream `stream`
  kCredit = 1,  ///< the receiver has consumed `seq` chunks of the sender's stream `stream` so far
  kAbort = 2,   ///< the sender's collective failed; `seq` is PackAbort's word
};

/// Streams per comm are tagged with 6 bits (a mesh of up to 65 ranks); sequence
/// numbers travel modulo 2^24 and are widened against what is expected (the credit
/// window, `slots`, is far smaller).
inline constexpr uint32_t kImmStreamBits = 6;
inline constexpr uint32_t kMaxStreams = 1u << kImmStreamBits;
inline constexpr uint32_t kImmSeqBits = 24;
inline constexpr uint32_t kImmSeqMask = (1u << kImmSeqBits) - 1;

/// kind (2 bits) | stream (6 bits) | seq (24 bits).
inline uint32_t PackImm(ImmKind kind, int stream, uint64_t seq) {
  return (static_cast<uint32_t>(kind) << 30) | ((static_cast<uint32_t>(stream) & (kMaxStreams - 1)) << kImmSeqBits) |
         (static_cast<uint32_t>(seq) & kImmSeqMask);
}
inline ImmKind ImmKindOf(uint32_t imm) { return static_cast<ImmKind>(imm >> 30); }
inline int ImmStream(uint32_t imm) { return static_cast<int>((imm >> kImmSeqBits) & (kMaxStreams - 1)); }
/// An abort's 24-bit word: bits 0-11 the rank that failed first, bits 12-23 one more
/// than the rank it lost its connection to (0: it failed on its own, or it is not
/// known). Ranks are below 4096 (a comm has at most 65 ranks). From a peer: decoded
/// values are only printed.
inline uint32_t PackAbort(int origin, int lost) {
  return (static_cast<uint32_t>(origin) & 0xfffu) | ((lost >= 0 ? (static_cast<uint32_t>(lost) + 1) & 0xfffu : 0u) << 12);
}
/// The failed rank of an abort word (PackAbort).
inline int AbortOrigin(uint32_t word) { return static_cast<int>(word & 0xfffu); }
/// The rank the failed rank lost, or -1 (PackAbort).
inline int AbortLost(uint32_t word) { return static_cast<int>((word >> 12) & 0xfffu) - 1; }

/// The full sequence number nearest at or after `base` whose low 24 bits are `imm`'s.
inline uint64_t WidenSeq(uint32_t imm, uint64_t base) {
  return base + ((static_cast<uint64_t>(imm) - base) & kImmSeqMask);
}

/// The connect record: magic "RYCN", version u16, shape u16 (Shape), rank u32, nranks u32,
/// chunk bytes u64, slots u32, one-shot bytes u64, key length u32, then the packed staging
/// RemoteKey. Version 3 added the one-shot bytes (2026-12-06: ranks that disagreed on
/// RAILYARD_COLLNET_SMALL_BYTES chose different algorithms for the same op and returned
/// wrong results or timed out, found by a new-user trial).
struct ConnectRecord {
  static constexpr uint16_t kVersion = 3;
  uint16_t shape = 0;  ///< the sender's Shape (peers must agree)
  uint32_t rank = 0;
  uint32_t nranks = 0;
  uint64_t chunkBytes = 0;
  uint32_t slots = 0;
  uint64_t smallBytes = 0;  ///< CollOptions::smallBytes (peers must agree)
  fabric::RemoteKey staging;

  std::vector<uint8_t> Pack() const;
  /// Validates magic, version, zero reserved bytes, exact length and the key (RemoteKey::Unpack).
  /// InvalidArgument naming what is wrong (peer data); `out` unchanged on error.
  static Status Unpack(std::span<const uint8_t> bytes, ConnectRecord* out);
};

}  // namespace railyard::collectives
