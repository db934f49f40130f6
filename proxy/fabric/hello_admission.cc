// proxy/fabric/hello_admission.cc: the fair share of a full table of sockets, by source address.
#include "proxy/fabric/hello_admission.h"

#include <unordered_map>

namespace railyard::fabric {

Admission AdmitPending(const std::vector<uint32_t>& waiting, uint32_t source, size_t max) {
  if (waiting.size() < max) return Admission{};
  // Every waiting socket may be closed: AdmitIdle's rule with all of them idle.
  std::vector<HeldConnection> held;
  held.reserve(waiting.size());
  for (uint32_t s : waiting) held.push_back({s, true});
  return AdmitIdle(held, source, max);
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
    if (n > most) {  // ties: the first to reach the count
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
