// proxy/fabric/hello_admission.cc: the fair share of the sockets waiting for a hello.
#include "proxy/fabric/hello_admission.h"

#include <unordered_map>

namespace railyard::fabric {

Admission AdmitPending(const std::vector<uint32_t>& waiting, uint32_t source, size_t max) {
  Admission a;
  if (waiting.size() < max) return a;
  std::unordered_map<uint32_t, size_t> held;
  held.reserve(waiting.size());
  uint32_t biggest = 0;
  size_t most = 0;
  for (uint32_t s : waiting) {
    const size_t n = ++held[s];
    if (n > most) {
      most = n;
      biggest = s;
    }
  }
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
  count.reserve(held.size());
  uint32_t biggest = 0;
  size_t most = 0;
  for (const HeldConnection& h : held) {
    const size_t n = ++count[h.source];
    if (n > most) {
      most = n;
      biggest = h.source;
    }
  }
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
