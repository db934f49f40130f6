// Dialing one socket of a TCP Endpoint: a non-blocking connect() from a rail's bound
// address to the peer's listener, and the rule for a refused connect. A refusal means
// nothing listens on that port yet (the peer's process, or the relay's railyardd, is
// still starting, or its Forwarder is rebuilding its listeners after a cable came
// back), so it is dialed again with backoff until a deadline, as NCCL's own socket
// connect does (src/misc/socket.cc: a refused connect is retried for about 20 s,
// RETRY_REFUSED_TIMES x SLEEP_INT). Any other connect error fails at once.
#pragma once

#include <netinet/in.h>

#include <chrono>
#include <string>
#include <vector>
#include <cstdint>

#include "proxy/fabric/fabric_error.h"
#include "proxy/socket.h"

namespace railyard::fabric::tcp {

/// Where one socket dials and until when a refusal is dialed again.
struct DialPlan {
  sockaddr_in local{};   ///< bound before connect() (the rail's address; port 0)
  sockaddr_in remote{};  ///< the peer's listener on that rail
  /// A refusal later than this fails the socket with CONNECT_FAILED; a default
  /// (epoch) deadline fails at the first refusal.
  std::chrono::steady_clock::time_point redialUntil{};
  /// Bytes sent first on every socket this plan dials (a redial sends them again), before
  /// any frame: a relay's RelayRecord and MAC when `remote` is a relay's socket port
  /// that splices the socket on to the listener (proxy/relay/relay_service.h). Empty:
  /// the socket goes straight to the listener. At most kMaxPreambleBytes.
  std::vector<uint8_t> preamble;
  /// Names `remote` in errors when it is not the listener itself (e.g. "relay h1
  /// (10.0.1.2:29518)"); empty when it is.
  std::string via;
};

/// Largest DialPlan::preamble: a RelayRecord (56 bytes) and its MAC (32).
inline constexpr size_t kMaxPreambleBytes = 256;

/// State of one socket's dialing. Not thread-safe; owned by its FrameSocket.
class Dialer {
 public:
  using Clock = std::chrono::steady_clock;
  /// First wait after a refusal (ms); doubled per refusal up to kMaxBackoffMs.
  static constexpr int kFirstBackoffMs = 5;
  static constexpr int kMaxBackoffMs = 200;

  explicit Dialer(DialPlan plan) : plan_(plan) {}

  /// Opens a non-blocking socket, binds plan.local and starts connect() to plan.remote.
  /// On success `*fd` is valid (connect under way, or already connected). A connect
  /// refused at once (loopback answers in the call) leaves `*fd` invalid and a redial
  /// scheduled, or CONNECT_FAILED past the deadline. SYSTEM for socket()/bind() and for
  /// any other connect() error.
  FabricError Start(proxy::Fd* fd);
  /// The kernel reported connect error `err` (SO_ERROR) on the socket Start made:
  /// ECONNREFUSED before the deadline schedules a redial and returns ok (the caller
  /// closes the socket and calls Start once Due()); anything else is CONNECT_FAILED
  /// naming errno and, after refusals, how many and over how long.
  FabricError Failed(int err);
  /// True while a redial waits for its backoff (no socket is open meanwhile).
  bool Waiting() const { return waiting_; }
  /// True when a waiting redial may start now.
  bool Due() const { return waiting_ && Clock::now() >= redialAt_; }
  /// Refusals so far.
  int refusals() const { return refusals_; }
  /// The plan it dials.
  const DialPlan& plan() const { return plan_; }

 private:
  FabricError Refused();
  DialPlan plan_;
  bool waiting_ = false;
  int refusals_ = 0;
  int backoffMs_ = kFirstBackoffMs;
  Clock::time_point firstRefusal_{};
  Clock::time_point redialAt_{};
};

}  // namespace railyard::fabric::tcp
