// The cabling shape the collectives run over (ring, chain or full mesh) and the ranks
// in cable order, and how it is found from who reaches whom. Pure logic, no I/O: the
// CollNet glue (plugin/collnet_shape.cc) builds the adjacency from the connect
// handles, or RAILYARD_COLLNET_SHAPE overrides it.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "env/status.h"

namespace railyard::collectives {

/// ring: every rank has two cable neighbours, the cables close a cycle;
/// chain: a path (the two ends have one neighbour); mesh: every pair is cabled.
enum class Shape : uint8_t { kRing = 0, kChain = 1, kMesh = 2 };
/// "ring", "chain", "mesh".
const char* ShapeName(Shape s);
/// Parses "ring", "chain", "mesh"; false for anything else.
bool ParseShape(std::string_view name, Shape* out);

/// A shape and the ranks in cable order (ring: around the cycle; chain: from one end;
/// mesh: rank order). An empty `order` means rank order 0..n-1.
struct Topology {
  Shape shape = Shape::kRing;
  std::vector<int> order;
  /// `order`, or 0..n-1 when it is empty.
  std::vector<int> OrderFor(int nranks) const;
  /// InvalidArgument unless `order` is empty or a permutation of 0..nranks-1.
  Status Validate(int nranks) const;
};

/// The shape of a symmetric adjacency matrix (adj[a][b]: rank a and rank b share a
/// cable; the diagonal is ignored): every pair adjacent -> mesh (1 and 2 ranks are a
/// mesh); a single cycle through all ranks with two neighbours each -> ring along it,
/// starting at rank 0 towards its lower-ranked neighbour; a single path -> chain from
/// its lower-ranked end. Anything else (a graph that is not connected, a rank with
/// three neighbours in a partial mesh) falls back to a ring in rank order when ranks
/// i and i+1 (and n-1 and 0) are all adjacent, a chain in rank order when i and i+1
/// are; otherwise InvalidArgument naming the first rank with no usable neighbour. Every rank
/// computes this from the same handles, so every rank gets the same answer.
Status ShapeFromAdjacency(const std::vector<std::vector<bool>>& adj, Topology* out);

}  // namespace railyard::collectives
