#include "proxy/fabric/access.h"

namespace railyard::fabric {

std::string AccessText(uint32_t flags) {
  std::string s;
  auto add = [&](uint32_t bit, const char* name) {
    if ((flags & bit) == 0) return;
    if (!s.empty()) s += '|';
    s += name;
  };
  add(kAccessLocal, "local");
  add(kAccessRemoteRead, "remote-read");
  add(kAccessRemoteWrite, "remote-write");
  add(kAccessRemoteAtomic, "remote-atomic");
  return s.empty() ? "none" : s;
}

}  // namespace railyard::fabric
