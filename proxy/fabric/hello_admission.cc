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

}  // namespace railyard::fabric
