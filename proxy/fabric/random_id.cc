#include "proxy/fabric/random_id.h"

#include <random>

namespace railyard::fabric {

uint64_t RandomNonZeroId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id;
}

}  // namespace railyard::fabric
