#include "proxy/collectives/plan.h"

#include <algorithm>
#include <cstring>

#include "proxy/collectives/ring_schedule.h"

namespace railyard::collectives {
namespace {

/// Calls f(first, elems) for each chunk of [first, first + elems).
template <typename F>
void ForChunks(uint64_t first, uint64_t elems, uint64_t ce, F f) {
  for (uint64_t o = 0; o < elems; o += ce) f(first + o, std::min(ce, elems - o));
}

struct Range {
  uint64_t first = 0, elems = 0;
};

/// Half h (0 first, 1 second) of rank r's block, as the ring cuts it.
Range HalfOf(const CollOp& op, int r, int h) {
  const uint64_t len = op.blockElems[static_cast<size_t>(r)];
  const uint64_t lo = len / 2;
  return {op.BlockOffset(r) + (h ? lo : 0), h ? len - lo : lo};
}

Range BlockOf(const CollOp& op, int r) { return {op.BlockOffset(r), op.blockElems[static_cast<size_t>(r)]}; }

void RingPlan(const CollOp& op, const std::vector<int>& order, int rank, uint64_t ce, Plan* p) {
  const int n = static_cast<int>(order.size());
  std::vector<int> rev(order.rbegin(), order.rend());
  for (int d = 0; d < 2; ++d) {
    RingSchedule sc(op, d == 0 ? order : rev, rank, d, ce);
    StreamPlan& sp = p->streams[static_cast<size_t>(d)];
    for (int t = sc.FirstStep(); t < sc.EndStep(); ++t) {
      const int sb = sc.SendBlockRank(t), rb = sc.RecvBlockRank(t);
      for (uint64_t k = 0; k < sc.Chunks(sb); ++k) {
        SendItem s{sc.Reduces(t) ? Buf::kWork : Buf::kResult, sc.ChunkFirst(sb, k), sc.ChunkElems(sb, k), {}};
        if (t > sc.FirstStep()) s.after = Ref{d, static_cast<uint32_t>(sc.RecvFlat(t - 1, k))};
        sp.send.push_back(s);
      }
      for (uint64_t k = 0; k < sc.Chunks(rb); ++k) {
        RecvItem r{sc.Reduces(t) ? Buf::kWork : Buf::kResult, sc.ChunkFirst(rb, k), sc.ChunkElems(rb, k),
                   sc.Reduces(t), sc.Reduces(t) && t == n - 2, {}};
        sp.recv.push_back(r);
      }
    }
  }
}

/// Every rank's range `ranges[r]` of `buf` travels to every rank along the topology
/// (allgather; one-shot's inputs). Ring: ceil((n-1)/2) hops along the order, the rest
/// against it; chain: both ways to the ends; mesh: straight to every peer.
void GatherPlan(Shape shape, const std::vector<int>& order, int rank, Buf buf, const std::vector<Range>& ranges,
                uint64_t ce, Plan* p) {
  const int n = static_cast<int>(order.size());
  if (shape == Shape::kMesh) {
    int j = 0;
    for (int peer = 0; peer < n; ++peer) {
      if (peer == rank) continue;
      StreamPlan& sp = p->streams[static_cast<size_t>(j++)];
      ForChunks(ranges[static_cast<size_t>(rank)].first, ranges[static_cast<size_t>(rank)].elems, ce,
                [&](uint64_t f, uint64_t e) { sp.send.push_back({buf, f, e, {}}); });
      ForChunks(ranges[static_cast<size_t>(peer)].first, ranges[static_cast<size_t>(peer)].elems, ce,
                [&](uint64_t f, uint64_t e) { sp.recv.push_back({buf, f, e, false, false, {}}); });
    }
    return;
  }
  const int pos = static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
  auto at = [&](int q) { return order[static_cast<size_t>(((q % n) + n) % n)]; };
  for (int d = 0; d < 2; ++d) {
    const int step = d == 0 ? 1 : -1;  // stream 0 sends to pos+1 and receives from pos-1
    int hops;                          // how far each rank's range travels on this stream
    if (shape == Shape::kRing) {
      hops = d == 0 ? n / 2 : (n - 1) / 2;
    } else {
      hops = n - 1;
    }
    // Ranks whose range this rank receives on stream d: pos - step, pos - 2 step, ...
    // (chain: only while inside the chain). It forwards all but the last hop's.
    std::vector<int> from;
    for (int h = 1; h <= hops; ++h) {
      const int q = pos - step * h;
      if (shape == Shape::kChain && (q < 0 || q >= n)) break;
      from.push_back(q);
    }
    const bool hasRight = shape == Shape::kRing ? hops > 0 : (pos + step >= 0 && pos + step < n);
    StreamPlan& sp = p->streams[static_cast<size_t>(d)];
    std::vector<uint32_t> recvStart;
    for (int q : from) {
      recvStart.push_back(static_cast<uint32_t>(sp.recv.size()));
      const Range& r = ranges[static_cast<size_t>(at(q))];
      ForChunks(r.first, r.elems, ce, [&](uint64_t f, uint64_t e) { sp.recv.push_back({buf, f, e, false, false, {}}); });
    }
    if (!hasRight) continue;
    const Range& own = ranges[static_cast<size_t>(rank)];
    ForChunks(own.first, own.elems, ce, [&](uint64_t f, uint64_t e) { sp.send.push_back({buf, f, e, {}}); });
    for (size_t i = 0; i < from.size(); ++i) {
      const int q = from[i];
      // Forward q's range when the next rank still needs it.
      const int dist = static_cast<int>(i) + 2;  // hops from q to pos + step
      if (shape == Shape::kRing && dist > hops) break;
      if (shape == Shape::kChain && (pos + step < 0 || pos + step >= n)) break;
      const Range& r = ranges[static_cast<size_t>(at(q))];
      uint32_t idx = recvStart[i];
      ForChunks(r.first, r.elems, ce, [&](uint64_t f, uint64_t e) {
        sp.send.push_back({buf, f, e, Ref{d, idx++}});
      });
    }
  }
}

/// Chain allreduce / reducescatter (see plan.h).
void ChainPlan(const CollOp& op, const std::vector<int>& order, int rank, uint64_t ce, Plan* p) {
  const int n = static_cast<int>(order.size());
  const int pos = static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
  std::vector<int> posOf(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) posOf[static_cast<size_t>(order[static_cast<size_t>(q)])] = q;
  const bool rs = op.kind == CollKind::kReduceScatter;
  if (rs) {
    p->gatherElems = std::max<uint64_t>(op.TotalElems(), 1);
    p->gatherAccum = true;
  }
  struct Chunk { uint64_t first, elems; int owner; };
  for (int h = 0; h < 2; ++h) {
    const int origin = h == 0 ? 0 : n - 1, terminal = n - 1 - origin;
    std::vector<Chunk> chunks;
    for (int r = 0; r < n; ++r) {
      const Range hr = HalfOf(op, r, h);
      ForChunks(hr.first, hr.elems, ce, [&](uint64_t f, uint64_t e) { chunks.push_back({f, e, r}); });
    }
    StreamPlan& red = p->streams[static_cast<size_t>(h)];
    // Reduce phase (these items come first in stream h's lists).
    const uint32_t redBase = static_cast<uint32_t>(red.recv.size());
    if (pos != origin) {
      for (const Chunk& c : chunks) {
        const bool fin = pos == terminal && (!rs || c.owner == rank);
        red.recv.push_back({Buf::kWork, c.first, c.elems, true, fin, {}});
      }
    }
    if (pos != terminal) {
      uint32_t idx = redBase;
      for (const Chunk& c : chunks) {
        SendItem s{Buf::kWork, c.first, c.elems, {}};
        if (pos != origin) s.after = Ref{h, idx++};
        red.send.push_back(s);
      }
    }
  }
  // Broadcast phases after both reduce phases (stream s: reduce of half s, then
  // broadcast of half 1-s).
  for (int h = 0; h < 2; ++h) {
    const int origin = h == 0 ? 0 : n - 1, terminal = n - 1 - origin;
    const int down = h == 0 ? -1 : 1;  // the broadcast travels pos -> pos + down on stream 1-h
    std::vector<Chunk> chunks;
    for (int r = 0; r < n; ++r) {
      const Range hr = HalfOf(op, r, h);
      ForChunks(hr.first, hr.elems, ce, [&](uint64_t f, uint64_t e) { chunks.push_back({f, e, r}); });
    }
    // Reducescatter carries a chunk only towards its owner: receiver q needs chunk c
    // when the owner sits at q or further along the broadcast.
    auto needs = [&](int q, const Chunk& c) {
      if (!rs) return true;
      const int op_ = posOf[static_cast<size_t>(c.owner)];
      return down < 0 ? op_ <= q : op_ >= q;
    };
    StreamPlan& bc = p->streams[static_cast<size_t>(1 - h)];
    const Buf cbuf = rs ? Buf::kGather : Buf::kResult;
    std::vector<int64_t> recvIdx(chunks.size(), -1);
    if (pos != terminal) {
      for (size_t i = 0; i < chunks.size(); ++i) {
        const Chunk& c = chunks[i];
        if (!needs(pos, c)) continue;
        recvIdx[i] = static_cast<int64_t>(bc.recv.size());
        bc.recv.push_back({cbuf, c.first, c.elems, false, rs && c.owner == rank, {}});
      }
    }
    const int next = pos + down;
    if (next >= 0 && next < n && pos != origin) {
      // The reduce phase's receive items of half h sit at the start of stream h.
      for (size_t i = 0; i < chunks.size(); ++i) {
        const Chunk& c = chunks[i];
        if (!needs(next, c)) continue;
        SendItem s;
        s.first = c.first;
        s.elems = c.elems;
        if (pos == terminal) {
          s.buf = rs ? Buf::kWork : Buf::kResult;
          s.after = Ref{h, static_cast<uint32_t>(i)};
        } else {
          s.buf = cbuf;
          s.after = Ref{1 - h, static_cast<uint32_t>(recvIdx[i])};
        }
        bc.send.push_back(s);
      }
    }
  }
}

void DirectPlan(const CollOp& op, int rank, uint64_t ce, Plan* p) {
  const int n = static_cast<int>(op.blockElems.size());
  const Range mine = BlockOf(op, rank);
  const int last = n - 2;  // the last stream (the highest other rank)
  int j = 0;
  for (int peer = 0; peer < n; ++peer) {
    if (peer == rank) continue;
    StreamPlan& sp = p->streams[static_cast<size_t>(j)];
    const Range theirs = BlockOf(op, peer);
    ForChunks(theirs.first, theirs.elems, ce, [&](uint64_t f, uint64_t e) { sp.send.push_back({Buf::kWork, f, e, {}}); });
    uint32_t k = 0;
    ForChunks(mine.first, mine.elems, ce, [&](uint64_t f, uint64_t e) {
      RecvItem r{Buf::kWork, f, e, true, j == last, {}};
      if (j > 0) r.after = Ref{j - 1, k};
      sp.recv.push_back(r);
      ++k;
    });
    if (op.kind == CollKind::kAllReduce) {
      uint32_t i = 0;
      ForChunks(mine.first, mine.elems, ce, [&](uint64_t f, uint64_t e) {
        sp.send.push_back({Buf::kResult, f, e, Ref{last, i++}});
      });
      ForChunks(theirs.first, theirs.elems, ce, [&](uint64_t f, uint64_t e) {
        sp.recv.push_back({Buf::kResult, f, e, false, false, {}});
      });
    }
    ++j;
  }
}

}  // namespace

const char* AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kRing: return "ring";
    case Algorithm::kChain: return "chain";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kOneShot: return "oneshot";
  }
  return "unknown";
}

bool ParseAlgorithm(const char* name, Algorithm* out) {
  for (Algorithm a : {Algorithm::kRing, Algorithm::kChain, Algorithm::kDirect, Algorithm::kOneShot}) {
    if (std::strcmp(name, AlgorithmName(a)) == 0) {
      *out = a;
      return true;
    }
  }
  return false;
}

Algorithm ChooseAlgorithm(const CollOp& op, Shape shape, uint64_t smallBytes) {
  if (op.kind == CollKind::kAllReduce && op.blockElems.size() > 1 &&
      op.TotalElems() * TypeBytes(op.type) <= smallBytes) {
    return Algorithm::kOneShot;
  }
  switch (shape) {
    case Shape::kRing: return Algorithm::kRing;
    case Shape::kChain: return Algorithm::kChain;
    case Shape::kMesh: return Algorithm::kDirect;
  }
  return Algorithm::kRing;
}

uint64_t ChunkElemsFor(const CollOp& op, Algorithm algorithm, uint64_t slotElems) {
  if (algorithm != Algorithm::kRing && algorithm != Algorithm::kChain) return slotElems;
  const uint64_t n = std::max<uint64_t>(op.blockElems.size(), 1);
  const uint64_t quarterStep = (op.TotalElems() + 8 * n - 1) / (8 * n);  // a step's half-block / 4
  const uint64_t floor = std::max<uint64_t>(kMinChunkBytes / TypeBytes(AccumType(op.type)), 1);
  return std::min(slotElems, std::max(quarterStep, floor));
}

StreamPeers PeersOf(const Topology& topo, int nranks, int rank) {
  StreamPeers s;
  if (topo.shape == Shape::kMesh) {
    for (int p = 0; p < nranks; ++p) {
      if (p == rank) continue;
      s.sendPeer.push_back(p);
      s.recvPeer.push_back(p);
      const int me = rank < p ? rank : rank - 1;  // this rank's index among p's others
      s.remoteRecv.push_back(me);
      s.remoteSend.push_back(me);
    }
    return s;
  }
  const std::vector<int> order = topo.OrderFor(nranks);
  const int n = nranks;
  const int pos = static_cast<int>(std::find(order.begin(), order.end(), rank) - order.begin());
  for (int d = 0; d < 2; ++d) {
    const int step = d == 0 ? 1 : -1;
    int right = pos + step, left = pos - step;
    if (topo.shape == Shape::kRing) {
      right = (right + n) % n;
      left = (left + n) % n;
    }
    s.sendPeer.push_back(right >= 0 && right < n ? order[static_cast<size_t>(right)] : -1);
    s.recvPeer.push_back(left >= 0 && left < n ? order[static_cast<size_t>(left)] : -1);
    s.remoteRecv.push_back(d);
    s.remoteSend.push_back(d);
  }
  return s;
}

Plan BuildPlan(const CollOp& op, Algorithm algorithm, const Topology& topo, int rank, uint64_t chunkElems) {
  Plan p;
  p.algorithm = algorithm;
  const int n = static_cast<int>(op.blockElems.size());
  p.streams.resize(PeersOf(topo, n, rank).size());
  const std::vector<int> order = topo.OrderFor(n);
  if (op.kind == CollKind::kAllGather) {
    std::vector<Range> ranges;
    for (int r = 0; r < n; ++r) ranges.push_back(BlockOf(op, r));
    if (algorithm == Algorithm::kRing) {
      RingPlan(op, order, rank, chunkElems, &p);
    } else {
      GatherPlan(topo.shape, order, rank, Buf::kResult, ranges, chunkElems, &p);
    }
    return p;
  }
  switch (algorithm) {
    case Algorithm::kRing: RingPlan(op, order, rank, chunkElems, &p); break;
    case Algorithm::kChain: ChainPlan(op, order, rank, chunkElems, &p); break;
    case Algorithm::kDirect: DirectPlan(op, rank, chunkElems, &p); break;
    case Algorithm::kOneShot: {
      const uint64_t total = op.TotalElems();
      std::vector<Range> ranges;
      for (int r = 0; r < n; ++r) ranges.push_back({static_cast<uint64_t>(r) * total, total});
      p.gatherElems = std::max<uint64_t>(total * static_cast<uint64_t>(n), 1);
      p.oneShotFinish = true;
      GatherPlan(topo.shape, order, rank, Buf::kGather, ranges, chunkElems, &p);
      break;
    }
  }
  return p;
}

}  // namespace railyard::collectives
