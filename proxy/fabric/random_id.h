// A random non-zero 64-bit id, for the identities a process picks for itself and
// sends to peers (a Worker's id, a cable set's id): std::random_device, so two
// processes started at once do not pick the same one.
#pragma once

#include <cstdint>

namespace railyard::fabric {

/// 64 random bits from std::random_device, never 0 (0 means "none" on the wires).
uint64_t RandomNonZeroId();

}  // namespace railyard::fabric
