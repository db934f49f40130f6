// Parsing of the RAILYARD_* variables described by the table in variables.cc.
#include "env/config.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <string>
#include <system_error>
#include <vector>

extern char** environ;

namespace railyard::env {
namespace {

constexpr std::string_view kPrefix = "RAILYARD_";

// "RAILYARD_X" or "NCCL_Y (alias of RAILYARD_X)" for error and log messages.
std::string Describe(const Variable& var, const char* source) {
  std::string s = source != nullptr ? source : var.name;
  if (source != nullptr && std::string_view(source) != var.name) {
    s += " (alias of ";
    s += var.name;
    s += ")";
  }
  return s;
}

Status Invalid(const Variable& var, const char* source, std::string_view value,
               const std::string& expected) {
  return InvalidUsage(Describe(var, source) + "='" + std::string(value) +
                      "' is not valid: expected " + expected);
}

// "4096", "512K", "1G": the largest power-of-1024 suffix that divides exactly.
std::string FormatBytes(std::int64_t v) {
  static constexpr struct {
    std::int64_t scale;
    const char* suffix;
  } kScales[] = {{std::int64_t{1} << 30, "G"}, {std::int64_t{1} << 20, "M"}, {std::int64_t{1} << 10, "K"}};
  for (const auto& s : kScales) {
    if (v != 0 && v % s.scale == 0) return std::to_string(v / s.scale) + s.suffix;
  }
  return std::to_string(v);
}

std::string IntRange(const Variable& var) {
  if (var.maxValue >= std::numeric_limits<int>::max()) return ">= " + std::to_string(var.minValue);
  return std::to_string(var.minValue) + ".." + std::to_string(var.maxValue);
}

std::string ExpectedInt(const Variable& var) {
  if (var.maxValue >= std::numeric_limits<int>::max()) {
    return "an integer >= " + std::to_string(var.minValue);
  }
  return "an integer in " + IntRange(var);
}

std::string ExpectedBytes(const Variable& var) {
  // A row's own `accepted` text (e.g. "0 = no cap" beside the range) is what the table shows
  // too, so the message and the docs say the same.
  const std::string range = var.accepted != nullptr
                                ? std::string(var.accepted)
                                : std::to_string(var.minValue) + ".." + std::to_string(var.maxValue) + " (" +
                                      FormatBytes(var.minValue) + ".." + FormatBytes(var.maxValue) + ")";
  return "a byte count in " + range + ", digits with an optional K, M or G suffix (powers of 1024)";
}

constexpr const char* kLevelNames = "one of NONE, VERSION, WARN, INFO, TRACE (any case)";

// Strict decimal: an optional '-', at least one digit, nothing else ("+4" and
// "+-4" are refused: a '+' is no part of the documented syntax).
// Returns false on syntax error; sets *overflow when the digits do not fit.
bool ParseDecimal(std::string_view s, std::int64_t* out, bool* overflow) {
  *overflow = false;
  if (s.empty()) return false;
  if (s.front() == '-' && s.size() == 1) return false;
  if (s.front() != '-' && !std::isdigit(static_cast<unsigned char>(s.front()))) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  if (ptr != s.data() + s.size()) return false;
  if (ec == std::errc::result_out_of_range) {
    *overflow = true;
    return true;
  }
  return ec == std::errc();
}

std::string Escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '*') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

Status ParseIntValue(const Variable& var, const char* source, std::string_view value,
                     std::int64_t* out) {
  std::int64_t v = 0;
  bool overflow = false;
  if (!ParseDecimal(value, &v, &overflow)) return Invalid(var, source, value, ExpectedInt(var));
  if (overflow || v < var.minValue || v > var.maxValue) {
    // The table shows ">= min" for rows capped only by int's range; an out-of-range
    // value is told that cap too (bad-input trial: "(out of range)" named no bound).
    std::string why = ExpectedInt(var) + " (out of range";
    const bool above = overflow ? value.front() != '-' : v > var.maxValue;
    if (above && var.maxValue >= std::numeric_limits<int>::max()) why += ": at most " + std::to_string(var.maxValue);
    return Invalid(var, source, value, why + ")");
  }
  *out = v;
  return Status::Ok();
}

Status ParseBytesValue(const Variable& var, const char* source, std::string_view value,
                       std::int64_t* out) {
  std::string_view digits = value;
  int shift = 0;
  if (!digits.empty()) {
    switch (digits.back()) {
      case 'k': case 'K': shift = 10; break;
      case 'm': case 'M': shift = 20; break;
      case 'g': case 'G': shift = 30; break;
      default: break;
    }
    if (shift != 0) digits.remove_suffix(1);
  }
  std::int64_t v = 0;
  bool overflow = false;
  if (!ParseDecimal(digits, &v, &overflow)) {
    return Invalid(var, source, value, ExpectedBytes(var));
  }
  // A byte count has no sign: "-4K" is malformed, not merely below the range (trial).
  if (!digits.empty() && digits.front() == '-') {
    return Invalid(var, source, value, ExpectedBytes(var) + " (a byte count is never negative)");
  }
  if (!overflow && shift != 0) {
    if (v > (std::numeric_limits<std::int64_t>::max() >> shift) ||
        v < (std::numeric_limits<std::int64_t>::min() >> shift)) {
      overflow = true;
    } else {
      v *= std::int64_t{1} << shift;
    }
  }
  if (overflow || v < var.minValue || v > var.maxValue) {
    return Invalid(var, source, value, ExpectedBytes(var) + " (out of range)");
  }
  *out = v;
  return Status::Ok();
}

Status ParseLevelValue(const Variable& var, const char* source, std::string_view value,
                       log::Level* out) {
  auto level = log::ParseLevelName(value);
  if (!level) return Invalid(var, source, value, kLevelNames);
  *out = *level;
  return Status::Ok();
}

std::size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  std::iota(prev.begin(), prev.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t substitute = prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, substitute});
    }
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

/// NCCL variables without a Railyard alias whose Railyard counterpart has another name,
/// by the part after NCCL_ (NCCL 2.28.9 src/transport/net_socket.cc, src/debug.cc).
/// "RAILYARD_SOCKET_NTHREADS" is what an NCCL user types for RAILYARD_NTHREADS.
constexpr struct {
  std::string_view ncclSuffix;
  std::string_view railyard;
} kNcclHints[] = {
    {"SOCKET_NTHREADS", "RAILYARD_NTHREADS"},
    {"NSOCKS_PERTHREAD", "RAILYARD_NSOCKS"},
};

const Variable* ByName(std::string_view name) {
  for (const Variable& var : Variables()) {
    if (name == var.name) return &var;
  }
  return nullptr;
}

}  // namespace

/// The known variable nearest to `name`, or nullptr when none is close. In order:
///  1. the same name in another case (RAILYARD_nsocks: names are case-sensitive);
///  2. the NCCL name's tail after RAILYARD_ (RAILYARD_IB_HCA -> RAILYARD_HCA, whose alias is
///     NCCL_IB_HCA; RAILYARD_SOCKET_NTHREADS -> RAILYARD_NTHREADS, see kNcclHints);
///  3. a known name that `name` extends after a '_' (RAILYARD_DEBUG_LEVEL -> RAILYARD_DEBUG);
///  4. the smallest edit distance (case-insensitive), when at most half of the part after
///     RAILYARD_ would have to change (RAILYARD_FOO is not "almost" anything;
///     RAILYARD_TIMEOUT is almost RAILYARD_TIMEOUT_MS).
const Variable* NearestVariable(std::string_view name) {
  const std::string upper = Upper(name);
  if (const Variable* same = ByName(upper)) return same;
  if (upper.starts_with(kPrefix)) {
    const std::string_view tail = std::string_view(upper).substr(kPrefix.size());
    for (const Variable& var : Variables()) {
      if (var.ncclAlias != nullptr && std::string_view(var.ncclAlias).substr(5) == tail) return &var;
    }
    for (const auto& hint : kNcclHints) {
      if (hint.ncclSuffix == tail) return ByName(hint.railyard);
    }
  }
  const Variable* longest = nullptr;
  for (const Variable& var : Variables()) {
    const std::string_view known = var.name;
    if (upper.size() > known.size() && upper.starts_with(known) && upper[known.size()] == '_' &&
        (longest == nullptr || known.size() > std::string_view(longest->name).size())) {
      longest = &var;
    }
  }
  if (longest != nullptr) return longest;
  const Variable* best = nullptr;
  std::size_t bestDistance = 0;
  for (const Variable& var : Variables()) {
    std::size_t d = EditDistance(upper, var.name);
    if (best == nullptr || d < bestDistance) {
      best = &var;
      bestDistance = d;
    }
  }
  const std::size_t suffix = name.size() > kPrefix.size() ? name.size() - kPrefix.size() : 0;
  return best != nullptr && bestDistance * 2 <= suffix ? best : nullptr;
}

/// RAILYARD_* variables of the project's scripts and test harnesses, not of the
/// plugin: tools/test.sh (RAILYARD_SKIP_LANE, RAILYARD_SKIP_SANITIZE,
/// RAILYARD_TEST_BUILD_DIR, RAILYARD_FUZZ, RAILYARD_TEST_OVERLAP,
/// RAILYARD_TEST_DEBUG_FLAGS, RAILYARD_TEST_OPT_FLAGS, RAILYARD_TEST_UNITY), tools/setup.sh
/// (RAILYARD_BUILD_DIR),
/// tests/lanes/run-verbs.sh (RAILYARD_LANE_TIMEOUT), tests/fuzz/run.sh (RAILYARD_FUZZ_*),
/// the config-doc test (RAILYARD_UPDATE_DOCS) and the conformance harness
/// (RAILYARD_CONFORMANCE_*). A process that loads the plugin while they are set is
/// not misconfigured, so they draw no warning.
bool IsToolingVariable(std::string_view name) {
  static constexpr std::string_view kTooling[] = {"RAILYARD_SKIP_LANE", "RAILYARD_SKIP_SANITIZE",
                                                  "RAILYARD_BUILD_DIR", "RAILYARD_TEST_BUILD_DIR",
                                                  "RAILYARD_LANE_TIMEOUT",
                                                  "RAILYARD_UPDATE_DOCS", "RAILYARD_FUZZ",
                                                  "RAILYARD_TEST_OVERLAP",
                                                  "RAILYARD_TEST_DEBUG_FLAGS", "RAILYARD_TEST_OPT_FLAGS",
                                                  "RAILYARD_TEST_UNITY"};
  if (name.starts_with("RAILYARD_CONFORMANCE_") || name.starts_with("RAILYARD_FUZZ_")) return true;
  return std::find(std::begin(kTooling), std::end(kTooling), name) != std::end(kTooling);
}

Status CheckCombinations(const Config& c) {
  if (c.discoveryDeadMs <= c.discoveryIntervalMs) {
    return InvalidUsage("RAILYARD_DISCOVERY_DEAD_MS=" + std::to_string(c.discoveryDeadMs) +
                        " must be larger than RAILYARD_DISCOVERY_INTERVAL_MS=" +
                        std::to_string(c.discoveryIntervalMs) +
                        ": a neighbour would be declared gone between two of its hellos "
                        "(make it a few intervals, e.g. " +
                        std::to_string(std::min(600000, 10 * c.discoveryIntervalMs)) + ")");
  }
  {
    // The TCP ports every host listens on, on its rails: each must be its own (a second
    // bind of one fails at run time, in whichever service starts second).
    const std::pair<const char*, int> ports[] = {
        {"RAILYARD_RELAY_PORT", c.relayPort},
        {"RAILYARD_FABRIC_RELAY_PORT", c.fabricRelayPort},
        {"RAILYARD_FABRIC_RELAY_VERBS_PORT", c.fabricRelayVerbsPort},
        {"RAILYARD_TIER_TUNNEL_PORT", c.tierTunnelPort},
        {"RAILYARD_TIER_TUNNEL_PORT + 1 (snapshot tunnel)", c.tierTunnelPort + 1}};
    for (size_t i = 0; i < std::size(ports); ++i) {
      for (size_t j = i + 1; j < std::size(ports); ++j) {
        if (ports[i].second != 0 && ports[i].second == ports[j].second) {
          return InvalidUsage(std::string(ports[i].first) + " and " + ports[j].first + " are both port " +
                              std::to_string(ports[i].second) + ": each of the rail ports must be its own");
        }
      }
    }
  }
  if (!c.addrRange.empty()) {
    // ApplyAddrRange accepted it as a CIDR of one family; a range of the other family than the
    // GIDs chosen can never match one (verbs GID selection would fail on every device).
    const std::string addr = c.addrRange.substr(0, c.addrRange.find('/'));
    unsigned char buf[16];
    const int rangeFamily = inet_pton(AF_INET, addr.c_str(), buf) == 1 ? AF_INET : AF_INET6;
    if (rangeFamily != c.addrFamily) {
      const bool v6 = rangeFamily == AF_INET6;
      return InvalidUsage("RAILYARD_ADDR_RANGE=" + c.addrRange + " is an " + (v6 ? "IPv6" : "IPv4") +
                          " range but RAILYARD_ADDR_FAMILY=" + (v6 ? "AF_INET" : "AF_INET6") +
                          " (or their NCCL_IB_ aliases): no GID of that family can lie in it; set "
                          "RAILYARD_ADDR_FAMILY=" + (v6 ? "AF_INET6" : "AF_INET") + " or give an " +
                          (v6 ? "IPv4" : "IPv6") + " range");
    }
  }
  return Status::Ok();
}

std::vector<std::string> RailyardNamesInEnvironment() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    std::string_view kv(*entry);
    std::string_view name = kv.substr(0, kv.find('='));
    if (name.starts_with(kPrefix)) names.emplace_back(name);
  }
  return names;
}

Status Parse(const Lookup& lookup, std::span<const std::string> names, Config* out) {
  // Unknown names first, so a typo is visible even when another value fails.
  for (const std::string& name : names) {
    if (!std::string_view(name).starts_with(kPrefix)) continue;
    bool known = std::any_of(Variables().begin(), Variables().end(),
                             [&](const Variable& var) { return name == var.name; });
    if (known || IsToolingVariable(name)) continue;
    const Variable* nearest = NearestVariable(name);
    if (nearest != nullptr && Upper(name) == nearest->name) {
      RY_WARN("unknown variable %s is ignored; did you mean %s? (names are case-sensitive)", name.c_str(),
              nearest->name);
    } else if (nearest != nullptr) {
      RY_WARN("unknown variable %s is ignored; did you mean %s?", name.c_str(), nearest->name);
    } else {
      RY_WARN("unknown variable %s is ignored (docs/configuration.md lists the variables)", name.c_str());
    }
  }

  Config config;
  for (const Variable& var : Variables()) {
    Status st = var.apply(var, var.name, var.defaultValue, &config);
    if (!st.ok()) {
      return InternalError("default of " + std::string(var.name) + " is invalid: " + st.message());
    }
  }

  for (const Variable& var : Variables()) {
    std::optional<std::string> ours = lookup(var.name);
    std::optional<std::string> alias;
    if (var.ncclAlias != nullptr) alias = lookup(var.ncclAlias);
    const bool oursSet = ours.has_value() && !ours->empty();
    const bool aliasSet = alias.has_value() && !alias->empty();

    const char* source = nullptr;
    const std::string* value = nullptr;
    if (oursSet) {
      source = var.name;
      value = &*ours;
      if (aliasSet && *alias != *ours) {
        RY_INFO(log::kEnv, "%s='%s' takes precedence over %s='%s'", var.name, ours->c_str(),
                var.ncclAlias, alias->c_str());
      }
    } else if (aliasSet) {
      source = var.ncclAlias;
      value = &*alias;
    } else {
      continue;
    }
    RY_RETURN_IF_ERROR(var.apply(var, source, *value, &config));
    RY_INFO(log::kEnv, "%s set by environment to '%s'", Describe(var, source).c_str(),
            value->c_str());
  }
  RY_RETURN_IF_ERROR(CheckCombinations(config));
  *out = std::move(config);
  return Status::Ok();
}

Status Load(const Config** out) {
  struct Loaded {
    Config config;
    Status status;
  };
  // A function-local static is initialised exactly once, thread-safely; a failure
  // is cached like a success.
  static const Loaded loaded = [] {
    Loaded l;
    std::vector<std::string> names = RailyardNamesInEnvironment();
    Lookup lookup = [](const char* name) -> std::optional<std::string> {
      const char* v = std::getenv(name);
      if (v == nullptr) return std::nullopt;
      return std::string(v);
    };
    // Not logged here: every caller reports the error it gets back (the plugin's
    // init through NCCL's log, the tools on stderr), so logging it here too printed
    // each configuration error twice.
    l.status = Parse(lookup, names, &l.config);
    return l;
  }();
  if (!loaded.status.ok()) return loaded.status;
  *out = &loaded.config;
  return Status::Ok();
}

std::string RenderMarkdown() {
  std::string md;
  md += "# Railyard configuration\n\n";
  md += "<!-- Generated from env/variables.cc by tools/railyard-config-doc; do not edit. -->\n\n";
  md += "Railyard reads these environment variables once per process (`env::Load()`).\n\n";
  md += "| Variable | Type | Default | Unit | Accepted values | NCCL alias | Description |\n";
  md += "|---|---|---|---|---|---|---|\n";
  for (const Variable& var : Variables()) {
    std::string type = var.type;
    // An empty default means something different per variable (automatic choice, no
    // key, no swap): each description says what; the column says only "(empty)".
    std::string def = *var.defaultValue != '\0' ? "`" + std::string(var.defaultValue) + "`" : "(empty)";
    std::string accepted;
    if (var.accepted != nullptr) {
      accepted = var.accepted;
    } else if (type == "int") {
      accepted = IntRange(var);
    } else if (type == "bytes") {
      accepted = std::to_string(var.minValue) + ".." + std::to_string(var.maxValue) + " (" +
                 FormatBytes(var.minValue) + ".." + FormatBytes(var.maxValue) + ")";
      std::int64_t d = 0;
      if (ParseBytesValue(var, var.name, var.defaultValue, &d).ok() && FormatBytes(d) != var.defaultValue) {
        def += " (" + FormatBytes(d) + ")";
      }
    } else if (type == "level") {
      accepted = "NONE, VERSION, WARN, INFO, TRACE";
    } else {
      accepted = "any text";
    }
    std::string alias = var.ncclAlias != nullptr ? "`" + std::string(var.ncclAlias) + "`" : "";
    md += "| `" + std::string(var.name) + "` | " + type + " | " + def + " | " + var.unit + " | " +
          Escape(accepted) + " | " + alias + " | " + Escape(var.doc) + " |\n";
  }
  md += "\n## Rules\n\n";
  md += "- An empty value is the same as an unset variable.\n";
  md += "- A malformed or out-of-range value makes initialisation fail with `ncclInvalidUsage`; "
        "the message names the variable, the value and what was expected.\n";
  md += "- Integers are decimal, without spaces. Byte counts accept one suffix `K`, `M` or `G` "
        "(either case), meaning 2^10, 2^20, 2^30.\n";
  md += "- When a variable with an NCCL alias is unset (or empty), the alias is used; when both "
        "are set, the `RAILYARD_` variable wins.\n";
  md += "- One exception: fabric-mode rails come from `RAILYARD_SOCKET_IFNAME` alone. "
        "`NCCL_SOCKET_IFNAME` is NCCL's bootstrap network (e.g. the management port) and chooses "
        "Railyard's devices only outside fabric mode. A port that carries the default route is a "
        "rail only when `RAILYARD_SOCKET_IFNAME` names it exactly (`=eth0`).\n";
  md += "- `RAILYARD_DISCOVERY_DEAD_MS` must be larger than `RAILYARD_DISCOVERY_INTERVAL_MS`.\n";
  md += "- `RAILYARD_RELAY_PORT`, `RAILYARD_FABRIC_RELAY_PORT`, `RAILYARD_FABRIC_RELAY_VERBS_PORT` (unless 0), "
        "`RAILYARD_TIER_TUNNEL_PORT` and `RAILYARD_TIER_TUNNEL_PORT` + 1 must all differ.\n";
  md += "- An unknown `RAILYARD_*` variable is ignored with a warning that names the nearest "
        "known variable when one is close. The variables of the project's scripts and tests "
        "(`RAILYARD_SKIP_LANE`, `RAILYARD_SKIP_SANITIZE`, `RAILYARD_BUILD_DIR`, "
        "`RAILYARD_TEST_BUILD_DIR`, "
        "`RAILYARD_LANE_TIMEOUT`, `RAILYARD_UPDATE_DOCS`, `RAILYARD_CONFORMANCE_*`, "
        "`RAILYARD_FUZZ`, `RAILYARD_FUZZ_*`, `RAILYARD_TEST_OVERLAP`, "
        "`RAILYARD_TEST_DEBUG_FLAGS`, `RAILYARD_TEST_OPT_FLAGS`, `RAILYARD_TEST_UNITY`) are not "
        "the plugin's and draw no warning.\n";
  md += "\nRegenerate this file with `railyard-config-doc docs/configuration.md` "
        "(target `railyard-config-doc`), or run the `config_doc_test` unit test (`ConfigDoc.*` in "
        "ctest) with "
        "`RAILYARD_UPDATE_DOCS=1`.\n";
  return md;
}

}  // namespace railyard::env
