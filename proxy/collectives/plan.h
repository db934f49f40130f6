// The plan of one collective on one rank: for every stream (a one-way data stream to
// a peer, paired with the stream from a peer), the list of chunks this rank sends and
// the list it receives, in stream order, with what each waits for. Pure arithmetic,
// no I/O; CollComm runs a plan (coll_comm.cc). Every rank builds its plan from the
// same op, topology and chunk size, so sender and receiver agree chunk for chunk.
//
// Algorithms (chosen by ChooseAlgorithm; the choice depends only on the op, the
// topology and the options, so it is the same on every rank):
//  - ring: both directions at once, each carrying half of every block (RingSchedule):
//    reduce-scatter n-1 steps, all-gather n-1 steps, pipelined chunk by chunk.
//  - chain: half A of every block is reduced along the chain from one end to the
//    other (stream 0) and broadcast back (stream 1); half B the other way round, so
//    both directions of every cable carry data all the time.
//  - direct (mesh): every rank sends block p of its input to rank p, which reduces
//    them (its own first, then the others in rank order), then sends its reduced
//    block to every rank.
//  - one-shot (allreduce up to smallBytes): every rank's whole input travels to every
//    rank (mesh: directly; ring: half the ranks each way; chain: both ways along it),
//    and every rank reduces the n inputs itself in rank order: fewest latency steps.
// Every reduced value is computed in one fixed order (by the block's owner, or by
// every rank in rank order for one-shot) and copied from there, so all ranks hold the
// same bits and the result is the same run after run.
#pragma once

#include <cstdint>
#include <vector>

#include "proxy/collectives/coll_op.h"
#include "proxy/collectives/shape.h"

namespace railyard::collectives {

enum class Algorithm : uint8_t { kRing = 0, kChain = 1, kDirect = 2, kOneShot = 3 };
/// "ring", "chain", "direct", "oneshot".
const char* AlgorithmName(Algorithm a);
/// Parses the names above; false for anything else.
bool ParseAlgorithm(const char* name, Algorithm* out);
/// One-shot for an allreduce of at most `smallBytes` bytes (n > 1), else the shape's
/// own algorithm (ring -> ring, chain -> chain, mesh -> direct).
Algorithm ChooseAlgorithm(const CollOp& op, Shape shape, uint64_t smallBytes);

/// Elements of one chunk of `op` under `algorithm`, given `slotElems` (a staging
/// slot's elements, > 0). Ring and chain: at most a quarter of a step's half-block
/// (ceil(total / (8 n)) elements, n = ranks), at least kMinChunkBytes worth, never more
/// than the slot, so every step in each direction is four chunks or more: consecutive
/// chunks take the cable's rails in turn even where a chunk is too small to be striped,
/// and a step overlaps the next (on the shaped ring of 4, 4 chunks a step ran 1-8 MiB
/// allreduces at 0.91-0.96 of the bound against 0.70-0.93 with 2). Others: the slot.
/// Depends only on the op, so every rank cuts the same chunks.
uint64_t ChunkElemsFor(const CollOp& op, Algorithm algorithm, uint64_t slotElems);
inline constexpr uint64_t kMinChunkBytes = 16 * 1024;

/// The buffers a plan item names: the accumulator (AccumType elements, global element
/// index), the result (the op's recv; global index, minus the rank's block offset for
/// reducescatter) and the gather buffer (one-shot: rank p's input at p * total; chain
/// reducescatter: AccumType partials being carried to their owner).
enum class Buf : uint8_t { kWork = 0, kResult = 1, kGather = 2 };

/// A receive item of a stream (`stream` < 0: none).
struct Ref {
  int stream = -1;
  uint32_t index = 0;
  bool valid() const { return stream >= 0; }
};

/// A chunk this rank sends: `elems` elements of `buf` from `first`, once `after`
/// (a receive item of this rank) has been processed.
struct SendItem {
  Buf buf = Buf::kWork;
  uint64_t first = 0, elems = 0;
  Ref after;
};

/// A chunk this rank receives: reduced into (`reduce`) or copied to `buf` at
/// `first`; `finalize`: then rounded (FromAccum, avg divided) into the result. Not
/// processed before `after` (keeps the reduction order fixed).
struct RecvItem {
  Buf buf = Buf::kWork;
  uint64_t first = 0, elems = 0;
  bool reduce = false;
  bool finalize = false;
  Ref after;
};

struct StreamPlan {
  std::vector<SendItem> send;
  std::vector<RecvItem> recv;
};

/// The peers of a topology's streams as seen from `rank`: stream s sends to
/// sendPeer[s] and receives from recvPeer[s] (-1: none, a chain's end);
/// remoteRecv[s] is the index at sendPeer[s] of the stream that receives from this
/// rank (the immediate's stream tag), remoteSend[s] the index at recvPeer[s] of the
/// stream that sends here (the credit's tag). Ring and chain: 2 streams (0 along the
/// order, 1 against it); mesh: n-1 streams, one per other rank in rank order.
struct StreamPeers {
  std::vector<int> sendPeer, recvPeer, remoteRecv, remoteSend;
  size_t size() const { return sendPeer.size(); }
};
StreamPeers PeersOf(const Topology& topo, int nranks, int rank);

struct Plan {
  Algorithm algorithm = Algorithm::kRing;
  std::vector<StreamPlan> streams;  ///< indexed like PeersOf
  uint64_t gatherElems = 0;         ///< elements of Buf::kGather
  bool gatherAccum = false;         ///< kGather holds AccumType elements (else the op's type)
  bool oneShotFinish = false;       ///< reduce the gathered inputs once every stream is done
};

/// The plan of `op` with `algorithm` on `rank` (nranks = op.blockElems.size() > 1).
/// `chunkElems` > 0: the most elements of one chunk (chunkBytes / AccumType bytes).
/// The algorithm must fit the topology: ring on a ring or mesh, chain on anything
/// with a path in `order`, direct and one-shot-mesh only on a mesh.
Plan BuildPlan(const CollOp& op, Algorithm algorithm, const Topology& topo, int rank, uint64_t chunkElems);

}  // namespace railyard::collectives
