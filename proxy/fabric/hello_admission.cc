// proxy/fabric/hello_admission.cc: the fair share of the sockets waiting for a hello.
#include "proxy/fabric/hello_admission.h"

#include <unordered_map>

namespace railyard::fabric {
namespace {

/// Of `n` entries (oldest first) whose sources `sourceOf(i)` gives: how many each source
/// holds, and the one holding the most (ties: the first to reach that count).
template <typename SourceOf>
void CountBySource(size_t n, SourceOf sourceOf, std::unordered_map<uint32_t, size_t>* held, uint32_t* biggest,
                   size_t* most) {
  held->reserve(n);
  *biggest = 0;
  *most = 0;
  for (size_t i = 0; i < n; ++i) {
    const uint32_t s = sourceOf(i);
    const size_t c = ++(*held)[s];
    if (c > *most) {
      *most = c;
      *biggest = s;
    }
  }
}

}  // namespace

Admission AdmitPending(const std::vector<uint32_t>& waiting, uint32_t source, size_t max) {
  Admission a;
  if (waiting.size() < max) return a;
  std::unordered_map<uint32_t, size_t> held;
  uint32_t biggest = 0;
  size_t most = 0;
  CountBySource(waiting.size(), [&](size_t i) { return waiting[i]; }, &held, &biggest, &most);
  const auto mine = held.find(source);
  if (mine != held.end() && mine->second >= most) {
    a.admit = false;  // the new socket's source is (one of) the biggest holders
    return a;
  }
  for (size_t i = 0; i < waiting.size(); ++i) {
    if (waiting[i] == biggest) {
      a.evict = i;  // its oldest
      break;
    }
  }
  return a;
}

Admission AdmitIdle(const std::vector<HeldConnection>& held, uint32_t source, size_t max) {
  Admission a;
  if (held.size() < max) return a;
  std::unordered_map<uint32_t, size_t> count;
  uint32_t biggest = 0;
  size_t most = 0;
  CountBySource(held.size(), [&](size_t i) { return held[i].source; }, &count, &biggest, &most);
  const auto mine = count.find(source);
  if (mine != count.end() && mine->second >= most) {
    a.admit = false;  // the new one's source holds (one of) the most
    return a;
  }
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i].source == biggest && held[i].idle) {
      a.evict = i;  // its oldest idle one
      return a;
    }
  }
  a.admit = false;  // every connection of that source is under way
  return a;
}

}  // namespace railyard::fabric
