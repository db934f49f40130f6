// Communication patterns (who sends to whom), bus-bandwidth factors and the
// float32 data pattern that makes misrouted or stale data visible.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace railyard::perf {

/// -p/--pattern values.
/// The gin-* patterns drive the one-sided tables (GIN v11 / RMA v14 / v13) instead of
/// the net table: gin_*_pattern.cc, run by gin_runner.cc. The collectives go through the
/// plugin's CollNet table (coll_runner.h).
enum class Pattern {
  kSendRecv, kRing, kAllToAll,
  kAllReduce, kAllGather, kReduceScatter,
  kGinPut, kGinSignal, kGinAllToAll,
  kGinPutOneWay,  ///< gin-put-oneway: even ranks put, odd ranks only receive (appended)
};
/// True for the CollNet patterns (allreduce, allgather, reducescatter).
inline bool IsCollective(Pattern p) {
  return p == Pattern::kAllReduce || p == Pattern::kAllGather || p == Pattern::kReduceScatter;
}
/// True for the gin-* patterns.
inline bool IsGinPattern(Pattern p) {
  return p == Pattern::kGinPut || p == Pattern::kGinSignal || p == Pattern::kGinAllToAll ||
         p == Pattern::kGinPutOneWay;
}

/// Element type used for every buffer (nccl-tests' default `float`).
using Elem = float;
/// Bytes per element.
inline constexpr std::size_t kElemSize = sizeof(Elem);

/// "sendrecv", "ring", "alltoall", "gin-put", "gin-signal" or "gin-alltoall".
const char* PatternName(Pattern p);

/// Inverse of PatternName (case-sensitive); nullopt for anything else.
std::optional<Pattern> ParsePattern(const std::string& name);

/// The peers one rank talks to in one pattern.
struct Peers {
  std::vector<int> sendTo;    ///< ranks this rank sends to, in posting order
  std::vector<int> recvFrom;  ///< ranks this rank receives from, in posting order
};

/// Peers of `rank` among `nranks`:
///  - sendrecv: pairs 0<->1, 2<->3, ... (needs an even nranks; see CheckRanks);
///  - ring: send to (r+1)%N, receive from (r-1+N)%N (N == 1: to and from itself);
///  - alltoall: every other rank, both ways (N == 1: none).
///  - gin-put and gin-signal pair ranks as sendrecv; gin-alltoall as alltoall.
Peers PeersOf(Pattern p, int rank, int nranks);

/// Empty when `nranks` suits the pattern, else a message (sendrecv needs an
/// even count, alltoall at least 2 ranks; ring runs on 1 rank by sending to itself).
std::string CheckRanks(Pattern p, int nranks);

/// busbw = algbw × factor: 1 for sendrecv and ring, (N−1)/N for alltoall, allgather and
/// reducescatter, 2(N−1)/N for allreduce (nccl-tests doc/PERFORMANCE.md).
double BusBwFactor(Pattern p, int nranks);

/// How one requested size maps onto the wire for a pattern.
struct Layout {
  std::size_t totalBytes;    ///< S: the "size" column and the bytes used for algbw
  std::size_t count;         ///< the "count" column: S / kElemSize
  std::size_t perPeerBytes;  ///< bytes in each isend/irecv
};

/// sendrecv/ring: S = size rounded down to whole elements, one message of S per peer.
/// alltoall: per-peer chunk = size/N rounded down to a multiple of 16 bytes (as
/// nccl-tests rounds per-rank counts), S = chunk × N; the chunk for rank q sits
/// at offset q × chunk of both the send and the receive buffer.
Layout LayoutFor(Pattern p, std::size_t requestedBytes, int nranks);

/// The value element `index` of the buffer `sender` sends in iteration `iter`
/// holds. Always a finite, non-zero, exactly representable float that changes
/// with each of the three inputs, so a buffer from the wrong sender, a stale
/// iteration or a shifted offset compares unequal.
Elem PatternValue(int sender, int iter, std::size_t index);

/// Writes PatternValue(sender, iter, firstIndex + i) to dst[i] for i < count.
void FillPattern(Elem* dst, std::size_t count, int sender, int iter, std::size_t firstIndex);

/// Overwrites `bytes` bytes with a poison (all-ones bytes: a NaN) before a receive.
void Poison(void* dst, std::size_t bytes);

/// Number of i < count with src[i] != PatternValue(sender, iter, firstIndex + i)
/// (bitwise comparison, so NaN poison counts as wrong).
std::size_t CountWrong(const Elem* src, std::size_t count, int sender, int iter,
                       std::size_t firstIndex);

}  // namespace railyard::perf
