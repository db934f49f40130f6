// The C++ wrapper (railyard/snapshot.hpp) over the installed C API: a refused
// connection throws SnapshotError with the C API's code and message.
#include <cstdio>
#include <string>

#include "railyard/snapshot.hpp"

int main() {
  try {
    railyard::Snapshot s("127.0.0.1", 1, "kv", RAILYARD_SNAPSHOT_PAGING, 1 << 20, 1 << 20);
    std::fprintf(stderr, "connected to port 1?\n");
    return 1;
  } catch (const railyard::SnapshotError& e) {
    if (e.code() != 2 || std::string(e.what()).find("127.0.0.1:1") == std::string::npos) {
      std::fprintf(stderr, "unexpected error %d: %s\n", e.code(), e.what());
      return 1;
    }
  }
  try {
    railyard::Snapshot s("not-an-ip", 7070, "kv", RAILYARD_SNAPSHOT_PAGING, 1 << 20, 1 << 20);
    return 1;
  } catch (const railyard::SnapshotError& e) {
    if (e.code() != 4) return 1;
  }
  std::printf("snapshot.hpp: ok\n");
  return 0;
}
