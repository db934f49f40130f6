#include "proxy/collectives/shape.h"

#include <algorithm>
#include <string>

namespace railyard::collectives {

const char* ShapeName(Shape s) {
  switch (s) {
    case Shape::kRing: return "ring";
    case Shape::kChain: return "chain";
    case Shape::kMesh: return "mesh";
  }
  return "unknown";
}

bool ParseShape(std::string_view name, Shape* out) {
  if (name == "ring") { *out = Shape::kRing; return true; }
  if (name == "chain") { *out = Shape::kChain; return true; }
  if (name == "mesh") { *out = Shape::kMesh; return true; }
  return false;
}

std::vector<int> Topology::OrderFor(int nranks) const {
  if (!order.empty()) return order;
  std::vector<int> o(static_cast<size_t>(nranks));
  for (int r = 0; r < nranks; ++r) o[static_cast<size_t>(r)] = r;
  return o;
}

Status Topology::Validate(int nranks) const {
  if (order.empty()) return Status::Ok();
  std::vector<int> sorted = order;
  std::sort(sorted.begin(), sorted.end());
  for (int r = 0; r < nranks; ++r) {
    if (sorted.size() != static_cast<size_t>(nranks) || sorted[static_cast<size_t>(r)] != r) {
      return InvalidArgument("collnet topology: the " + std::string(ShapeName(shape)) +
                             " order is not a permutation of the " + std::to_string(nranks) + " ranks");
    }
  }
  return Status::Ok();
}

Status ShapeFromAdjacency(const std::vector<std::vector<bool>>& adj, Topology* out) {
  const int n = static_cast<int>(adj.size());
  auto A = [&](int a, int b) {
    return a != b && adj[static_cast<size_t>(a)].size() > static_cast<size_t>(b) &&
           adj[static_cast<size_t>(a)][static_cast<size_t>(b)] &&
           adj[static_cast<size_t>(b)].size() > static_cast<size_t>(a) &&
           adj[static_cast<size_t>(b)][static_cast<size_t>(a)];
  };
  Topology t;
  bool complete = true;
  std::vector<std::vector<int>> nb(static_cast<size_t>(n));
  for (int a = 0; a < n; ++a) {
    for (int b = 0; b < n; ++b) {
      if (a == b) continue;
      if (A(a, b)) nb[static_cast<size_t>(a)].push_back(b);
      else complete = false;
    }
  }
  if (complete) {
    t.shape = Shape::kMesh;
    *out = t;
    return Status::Ok();
  }
  // A single path or cycle: every degree <= 2; walk from an end (or from rank 0).
  const bool degreesOk = std::all_of(nb.begin(), nb.end(), [](const auto& v) { return !v.empty() && v.size() <= 2; });
  if (degreesOk) {
    int ends = 0, start = -1;
    for (int r = 0; r < n; ++r) {
      if (nb[static_cast<size_t>(r)].size() == 1) {
        ++ends;
        if (start < 0) start = r;
      }
    }
    if (ends == 0 || ends == 2) {
      const bool ring = ends == 0;
      if (ring) start = 0;
      std::vector<int> order{start};
      std::vector<bool> seen(static_cast<size_t>(n), false);
      seen[static_cast<size_t>(start)] = true;
      int cur = start;
      for (;;) {
        int next = -1;
        for (int x : nb[static_cast<size_t>(cur)]) {  // ascending: the lower-ranked neighbour first
          if (!seen[static_cast<size_t>(x)]) { next = x; break; }
        }
        if (next < 0) break;
        seen[static_cast<size_t>(next)] = true;
        order.push_back(next);
        cur = next;
      }
      if (order.size() == static_cast<size_t>(n) && (!ring || A(order.back(), order.front()))) {
        t.shape = ring ? Shape::kRing : Shape::kChain;
        t.order = std::move(order);
        *out = t;
        return Status::Ok();
      }
    }
  }
  bool path = true;
  for (int r = 0; r + 1 < n; ++r) path = path && A(r, r + 1);
  if (path) {
    t.shape = n > 2 && A(n - 1, 0) ? Shape::kRing : Shape::kChain;
    *out = t;
    return Status::Ok();
  }
  for (int r = 0; r < n; ++r) {
    if (nb[static_cast<size_t>(r)].empty()) {
      return InvalidArgument("collnet topology: rank " + std::to_string(r) + " reaches no other rank");
    }
  }
  return InvalidArgument("collnet topology: the " + std::to_string(n) +
                         " ranks' cables form no ring, chain or mesh");
}

}  // namespace railyard::collectives
