// The verbs fabric Domain a tier test runs on, one helper for the expert and snapshot
// tests (tests/expert/expert_test_util.h VerbsDomain, tests/snapshot/snapshot_transport.cc
// MakeTestDomain). In the soft-RoCE lane (tests/lanes/rxe, flat mode: RXE_LANE_HOSTS set)
// lane host `host` (0: the serving peer, 1: the client) takes its own rxe devices
// (RXE_LANE_DEVS_H<host>, as RAILYARD_HCA "=dev,dev"), so traffic crosses the rail veths;
// a lane without them is a SystemError (a failure, never a skip). Elsewhere RAILYARD_HCA's
// ports, or every usable one: InvalidUsage when the host has none (tests skip then).
// Header-only: each test binary compiles it.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>

#include "env/config.h"
#include "proxy/fabric/verbs/verbs_domain.h"

namespace railyard::test_support {

/// Whether the rest of the RAILYARD_* settings come from the process environment
/// (a test whose serving process inherits it) or are all defaults.
enum class LaneEnv { kDefaults, kProcess };

/// Creates the Domain described above; `timeoutMs` is the Endpoints' fabric timeout
/// (connection setup gets at least 20 s: the lane's emulation takes seconds).
inline Status LaneVerbsDomain(int host, int timeoutMs, LaneEnv env, std::unique_ptr<fabric::Domain>* out) {
  const char* lane = std::getenv("RXE_LANE_HOSTS");
  std::string hca;
  if (lane != nullptr) {
    const std::string var = "RXE_LANE_DEVS_H" + std::to_string(host);
    const char* devs = std::getenv(var.c_str());
    if (devs == nullptr) return SystemError("in the soft-RoCE lane but " + var + " is unset");
    hca = "=";
    for (const char* p = devs; *p != 0; ++p) hca += *p == ' ' ? ',' : *p;
  }
  env::Config config;
  RY_RETURN_IF_ERROR(env::Parse(
      [&](const char* name) -> std::optional<std::string> {
        if (std::string(name) == "RAILYARD_HCA" && !hca.empty()) return hca;
        const char* v = env == LaneEnv::kProcess ? std::getenv(name) : nullptr;
        if (v != nullptr) return std::string(v);
        return std::nullopt;
      },
      {}, &config));
  fabric::verbs::VerbsOptions o = fabric::verbs::VerbsOptions::FromConfig(config);
  o.bootstrapAddress = "127.0.0.1";
  o.timeoutMs = timeoutMs;
  o.connectTimeoutMs = std::max(timeoutMs, 20000);
  Status s = fabric::verbs::CreateVerbsDomain(o, out);
  if (!s.ok() && lane != nullptr) return SystemError("soft-RoCE lane: " + s.message());
  return s;
}

}  // namespace railyard::test_support
