// railyard-config-doc: prints docs/configuration.md, generated from the variable
// table in env/variables.cc.
//
// Usage: railyard-config-doc            markdown to stdout
//        railyard-config-doc PATH       markdown written to PATH (replaced)
// Exit status: 0 on success, 1 on a write error, 2 on bad usage.
#include <cstdio>
#include <fstream>
#include <string>

#include "env/config.h"

int main(int argc, char** argv) {
  if (argc > 2) {
    std::fprintf(stderr, "usage: %s [OUTPUT.md]\n", argv[0]);
    return 2;
  }
  const std::string md = railyard::env::RenderMarkdown();
  if (argc == 1) {
    std::fwrite(md.data(), 1, md.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  std::ofstream out(argv[1], std::ios::binary | std::ios::trunc);
  out << md;
  out.close();
  if (!out) {
    std::fprintf(stderr, "railyard-config-doc: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
