#include "proxy/fabric/random_id.h"

#include <fcntl.h>
#include <sys/random.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace railyard::fabric {

uint64_t RandomNonZeroId() {
  std::random_device rd;
  uint64_t id = 0;
  while (id == 0) id = (static_cast<uint64_t>(rd()) << 32) ^ rd();
  return id;
}

namespace {

/// Fills `out` from /dev/urandom; false when it cannot be read.
bool FromUrandom(uint64_t* out) {
  const int fd = ::open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const ssize_t n = ::read(fd, out, sizeof *out);
  ::close(fd);
  return n == static_cast<ssize_t>(sizeof *out);
}

}  // namespace

uint64_t SecretKey64() {
  uint64_t key = 0;
  while (key == 0) {
    const ssize_t n = ::getrandom(&key, sizeof key, 0);
    if (n == static_cast<ssize_t>(sizeof key)) continue;
    if (n < 0 && errno == EINTR) continue;
    if (!FromUrandom(&key)) {
      std::fprintf(stderr, "railyard: no source of random keys (getrandom and /dev/urandom failed)\n");
      std::abort();
    }
  }
  return key;
}

}  // namespace railyard::fabric
