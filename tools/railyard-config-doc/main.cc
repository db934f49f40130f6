// railyard-config-doc: prints docs/configuration.md, generated from the variable
// table in env/variables.cc.
//
// Usage: railyard-config-doc            markdown to stdout
//        railyard-config-doc PATH       markdown written to PATH (replaced)
//        railyard-config-doc --help
// Exit status: 0 on success, 1 on a write error, 2 on bad usage (an unknown option, more
// than one path; a path starting with '-' must follow "--").
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "env/config.h"
#include "tools/common/cli_parse.h"

int main(int argc, char** argv) {
  CLI::App app{"railyard-config-doc: writes docs/configuration.md, generated from env/variables.cc"};
  std::string output;
  app.add_option("OUTPUT", output, "file to write (replaced); default: standard output");
  app.footer("Exit status: 0 written, 1 write error, 2 usage error.");
  if (std::optional<int> exitNow = railyard::tools::ParseCommandLine(app, argc, argv, "railyard-config-doc")) {
    return *exitNow;
  }
  const std::string md = railyard::env::RenderMarkdown();
  if (output.empty()) {
    // fwrite of more than the stdio buffer goes straight to the fd: its short count (or
    // the stream's error flag), not fflush, is where a full disk or a closed pipe shows.
    const bool written = std::fwrite(md.data(), 1, md.size(), stdout) == md.size();
    if (!written || std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "railyard-config-doc: cannot write to standard output: %s\n", std::strerror(errno));
      return 1;
    }
    return 0;
  }
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  out << md;
  out.close();
  if (!out) {
    std::fprintf(stderr, "railyard-config-doc: cannot write %s: %s\n", output.c_str(), std::strerror(errno));
    return 1;
  }
  return 0;
}
