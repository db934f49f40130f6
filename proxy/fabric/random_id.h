// A random non-zero 64-bit id, for the identities a process picks for itself and
// sends to peers (a Worker's id, a cable set's id): std::random_device, so two
// processes started at once do not pick the same one.
#pragma once

#include <cstdint>

namespace railyard::fabric {

/// 64 random bits from std::random_device, never 0 (0 means "none" on the wires).
uint64_t RandomNonZeroId();

/// 64 bits from the kernel's CSPRNG (getrandom(2); /dev/urandom where that call is
/// missing), never 0: a region's software key, the capability a peer must present to
/// reach it, so that no key can be derived from another (a hostile-peer probe inverted
/// the former splitmix64 sequence from one key it was given and predicted the next
/// client's and another arena's). Aborts only if neither source can be read.
uint64_t SecretKey64();

}  // namespace railyard::fabric
