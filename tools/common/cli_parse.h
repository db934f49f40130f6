// One command-line parse for every Railyard tool, so usage errors exit 2 everywhere.
#pragma once

#include <cctype>
#include <cstdio>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <CLI/CLI.hpp>

namespace railyard::tools {

/// Exit status of a Railyard tool for a usage error (unknown option, bad value, failed check).
/// CLI11's own codes (105 for a failed validator, 106 for a missing option, ...) are not used.
inline constexpr int kUsageExit = 2;

/// A numeric option's check: the value must read as a number (else "'abc' is not a
/// number"; CLI11's Range alone said "Value abc not in range 0 to 600000", a trial
/// found), then lie in [min, max] inclusive (else "'-1' is out of range: expected
/// 0..600000", the wording of the tiers' C API; CLI11 prefixes the flag). A number that
/// does not read as an integral T is said so ("'1.5' is not an integer (digits only)");
/// digits past T's range are out of range.
template <typename T>
CLI::Validator InRange(T min, T max) {
  const CLI::Range range(min, max);
  const auto text = [](T x) {
    std::ostringstream o;
    o << x;  // 600000, 1.01, 1024
    return o.str();
  };
  const std::string expected = "expected " + text(min) + ".." + text(max);
  return CLI::Validator(
      [range, expected](std::string& value) -> std::string {
        const std::string outOfRange = "'" + value + "' is out of range: " + expected;
        T v{};
        double d = 0;
        if (CLI::detail::lexical_cast(value, v)) return range(value).empty() ? "" : outOfRange;
        if (!CLI::detail::lexical_cast(value, d)) return "'" + value + "' is not a number";
        if constexpr (std::is_integral_v<T>) {
          // "-5" for an unsigned, or digits past T's range: out of range.
          const size_t digits = value.find_first_not_of("0123456789", value.front() == '-' ? 1 : 0);
          if (digits == std::string::npos) return outOfRange;
          return "'" + value + "' is not an integer (digits only)";
        }
        return range(value).empty() ? "" : outOfRange;
      },
      range.get_description());
}

/// A size option's transform: "64K", "1M", "2G" (any case, powers of 1024) become the
/// bytes as digits ("65536"); any other text is left exactly as typed for the option's
/// own check (InRange), so "-4096", "abc" and "1.5K" are refused in InRange's words.
/// A product past 2^64 is refused here ("'99999999999G' is too large").
inline CLI::Validator SizeSuffix() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        if (value.size() < 2) return "";
        const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(value.back())));
        const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
        const std::string digits = value.substr(0, value.size() - 1);
        if (shift == 0 || digits.find_first_not_of("0123456789") != std::string::npos) return "";
        unsigned long long v = 0;
        for (char c : digits) {
          if (v > (~0ull - static_cast<unsigned long long>(c - '0')) / 10) return "'" + value + "' is too large";
          v = v * 10 + static_cast<unsigned long long>(c - '0');
        }
        if (v > (~0ull >> shift)) return "'" + value + "' is too large";
        value = std::to_string(v << shift);
        return "";
      },
      "SIZE[K|M|G]");
}

#ifndef RAILYARD_TOOLS_VERSION
#define RAILYARD_TOOLS_VERSION "unknown"  // tools/CMakeLists.txt defines it from project(VERSION)
#endif

/// Adds `--version`, printing "<tool> <version>" (CMake's PROJECT_VERSION) and exiting 0
/// (CLI11 throws CallForVersion, a CLI::Success). Every Railyard tool has it.
inline void AddVersionFlag(CLI::App& app, const char* tool) {
  app.set_version_flag("--version", std::string(tool) + " " + RAILYARD_TOOLS_VERSION, "print the version and exit");
}

/// For a parse with `app.allow_extras()`: the usage error naming the arguments `app`
/// did not expect, in the order they were typed, or "" when there were none. CLI11's
/// own ExtrasError names them last first ("/tmp --swap-dir" for `--swap-dir /tmp`, a
/// new-user trial found), so every tool allows extras and refuses them with this.
inline std::string UnexpectedArguments(const CLI::App& app) {
  const std::vector<std::string> rest = app.remaining();
  if (rest.empty()) return "";
  std::string list;
  for (const std::string& a : rest) list += (list.empty() ? "" : " ") + a;
  return std::string(rest.size() > 1 ? "The following arguments were not expected: "
                                     : "The following argument was not expected: ") +
         list;
}

/// Parses argv with `app`. Returns nullopt when the tool should go on; otherwise the exit
/// status it should return at once: 0 after --help (or CLI11's --help-all / --version) was
/// printed to stdout, kUsageExit after a parse error, printed to stderr as
/// "<tool>: <what>\nRun with --help for more information.".
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv, const char* tool) {
  if (app.get_option_no_throw("--version") == nullptr) AddVersionFlag(app, tool);
  app.allow_extras();  // refused below, named in the order typed
  std::string error;
  try {
    app.parse(argc, argv);
    error = UnexpectedArguments(app);
  } catch (const CLI::Success& e) {  // --help and friends: CallForHelp, CallForAllHelp, CallForVersion
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    error = e.what();
  }
  if (error.empty()) return std::nullopt;
  std::fprintf(stderr, "%s: %s\nRun with --help for more information.\n", tool, error.c_str());
  return kUsageExit;
}

}  // namespace railyard::tools
