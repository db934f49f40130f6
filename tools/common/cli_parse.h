// One command-line parse for every Railyard tool, so usage errors exit 2 everywhere.
#pragma once

#include <cstdio>
#include <optional>

#include <CLI/CLI.hpp>

namespace railyard::tools {

/// Exit status of a Railyard tool for a usage error (unknown option, bad value, failed check).
/// CLI11's own codes (105 for a failed validator, 106 for a missing option, ...) are not used.
inline constexpr int kUsageExit = 2;

/// Parses argv with `app`. Returns nullopt when the tool should go on; otherwise the exit
/// status it should return at once: 0 after --help (or CLI11's --help-all / --version) was
/// printed to stdout, kUsageExit after a parse error, printed to stderr as
/// "<tool>: <what>\nRun with --help for more information.".
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv, const char* tool) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help and friends: CallForHelp, CallForAllHelp, CallForVersion
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "%s: %s\nRun with --help for more information.\n", tool, e.what());
    return kUsageExit;
  }
  return std::nullopt;
}

}  // namespace railyard::tools
