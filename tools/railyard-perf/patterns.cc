#include "tools/railyard-perf/patterns.h"

#include <cstring>

namespace railyard::perf {

const char* PatternName(Pattern p) {
  switch (p) {
    case Pattern::kSendRecv: return "sendrecv";
    case Pattern::kRing: return "ring";
    case Pattern::kAllToAll: return "alltoall";
    case Pattern::kAllReduce: return "allreduce";
    case Pattern::kAllGather: return "allgather";
    case Pattern::kReduceScatter: return "reducescatter";
    case Pattern::kGinPut: return "gin-put";
    case Pattern::kGinSignal: return "gin-signal";
    case Pattern::kGinAllToAll: return "gin-alltoall";
    case Pattern::kGinPutOneWay: return "gin-put-oneway";
  }
  return "?";
}

std::optional<Pattern> ParsePattern(const std::string& name) {
  if (name == "sendrecv") return Pattern::kSendRecv;
  if (name == "ring") return Pattern::kRing;
  if (name == "alltoall") return Pattern::kAllToAll;
  if (name == "allreduce") return Pattern::kAllReduce;
  if (name == "allgather") return Pattern::kAllGather;
  if (name == "reducescatter") return Pattern::kReduceScatter;
  if (name == "gin-put") return Pattern::kGinPut;
  if (name == "gin-signal") return Pattern::kGinSignal;
  if (name == "gin-alltoall") return Pattern::kGinAllToAll;
  if (name == "gin-put-oneway") return Pattern::kGinPutOneWay;
  return std::nullopt;
}

namespace {
/// The net pattern a gin-* pattern shares its peers, rank rules and factors with.
Pattern NetShape(Pattern p) {
  if (p == Pattern::kGinPut || p == Pattern::kGinSignal || p == Pattern::kGinPutOneWay) return Pattern::kSendRecv;
  if (p == Pattern::kGinAllToAll) return Pattern::kAllToAll;
  return p;
}
}  // namespace

Peers PeersOf(Pattern p, int rank, int nranks) {
  p = NetShape(p);
  Peers peers;
  switch (p) {
    case Pattern::kSendRecv: {
      const int partner = rank ^ 1;
      if (partner < nranks) {
        peers.sendTo.push_back(partner);
        peers.recvFrom.push_back(partner);
      }
      break;
    }
    case Pattern::kRing:
      peers.sendTo.push_back((rank + 1) % nranks);
      peers.recvFrom.push_back((rank - 1 + nranks) % nranks);
      break;
    case Pattern::kAllToAll:
      // Staggered order (r+1, r+2, ...) so that not every rank hits rank 0 first.
      for (int k = 1; k < nranks; ++k) {
        peers.sendTo.push_back((rank + k) % nranks);
        peers.recvFrom.push_back((rank - k + nranks) % nranks);
      }
      break;
    default:
      break;  // collectives: the CollNet comm connects its own neighbours
    case Pattern::kGinPut:
    case Pattern::kGinSignal:
    case Pattern::kGinAllToAll:
    case Pattern::kGinPutOneWay:
      break;  // mapped by NetShape above
  }
  return peers;
}

std::string CheckRanks(Pattern p, int nranks) {
  if (nranks < 1) return "need at least one rank";
  if (IsGinPattern(p) && NetShape(p) == Pattern::kSendRecv && nranks % 2 != 0) {
    return std::string("pattern ") + PatternName(p) + " pairs ranks 0<->1, 2<->3, ... and needs an even number of ranks";
  }
  if (p == Pattern::kGinAllToAll && nranks < 2) return "pattern gin-alltoall needs at least 2 ranks";
  if (p == Pattern::kAllToAll && nranks < 2) return "pattern alltoall needs at least 2 ranks";
  if (p == Pattern::kSendRecv && nranks % 2 != 0) {
    return "pattern sendrecv pairs ranks 0<->1, 2<->3, ... and needs an even number of ranks (got " +
           std::to_string(nranks) + ")";
  }
  return {};
}

double BusBwFactor(Pattern p, int nranks) {
  if (nranks <= 0) return 0.0;
  p = NetShape(p);
  if (p == Pattern::kAllReduce) return 2.0 * double(nranks - 1) / double(nranks);
  if (p == Pattern::kAllToAll || p == Pattern::kAllGather || p == Pattern::kReduceScatter) {
    return double(nranks - 1) / double(nranks);
  }
  return 1.0;
}

Layout LayoutFor(Pattern p, std::size_t requestedBytes, int nranks) {
  p = NetShape(p);
  Layout l{};
  if (p == Pattern::kAllToAll) {
    const std::size_t n = nranks > 0 ? std::size_t(nranks) : 1;
    l.perPeerBytes = (requestedBytes / n) & ~std::size_t{15};
    l.totalBytes = l.perPeerBytes * n;
  } else {
    l.totalBytes = requestedBytes / kElemSize * kElemSize;
    l.perPeerBytes = l.totalBytes;
  }
  l.count = l.totalBytes / kElemSize;
  return l;
}

Elem PatternValue(int sender, int iter, std::size_t index) {
  // Mix the inputs (splitmix64 finaliser), keep 22 bits and add 1: an integer in
  // [1, 2^22], exact in float32 and never equal to the zero or NaN poison.
  std::uint64_t x = (std::uint64_t(std::uint32_t(sender)) << 40) ^
                    (std::uint64_t(std::uint32_t(iter)) << 20) ^ std::uint64_t(index) * 0x9E3779B97F4A7C15ull;
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 31;
  return Elem(double((x & 0x3FFFFF) + 1));
}

void FillPattern(Elem* dst, std::size_t count, int sender, int iter, std::size_t firstIndex) {
  for (std::size_t i = 0; i < count; ++i) dst[i] = PatternValue(sender, iter, firstIndex + i);
}

void Poison(void* dst, std::size_t bytes) { std::memset(dst, 0xff, bytes); }

std::size_t CountWrong(const Elem* src, std::size_t count, int sender, int iter,
                       std::size_t firstIndex) {
  std::size_t wrong = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const Elem want = PatternValue(sender, iter, firstIndex + i);
    if (std::memcmp(&src[i], &want, sizeof(Elem)) != 0) ++wrong;
  }
  return wrong;
}

}  // namespace railyard::perf
