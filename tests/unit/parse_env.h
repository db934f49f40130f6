// Parses a configuration from a fixed list of variables instead of the process
// environment, for tests of the env table's rows. Header-only: every
// tests/unit/*_test.cc is its own binary.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "env/config.h"

namespace railyard::test_support {

/// env::Parse over `vars` (name, value) only; *st receives Parse's status and the
/// returned Config is only meaningful when it is Ok.
inline env::Config ParseEnv(std::vector<std::pair<std::string, std::string>> vars, Status* st) {
  env::Lookup lookup = [vars](const char* name) -> std::optional<std::string> {
    for (const auto& [k, v] : vars) {
      if (k == name) return v;
    }
    return std::nullopt;
  };
  env::Config c;
  *st = env::Parse(lookup, {}, &c);
  return c;
}

}  // namespace railyard::test_support
