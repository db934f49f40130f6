// Target side of one verbs connection (a peer's Endpoint to this Worker): its QPs,
// the receive buffers posted for the peer's records and immediates, and the credits
// returned to the peer (an RDMA WRITE of the count of buffers re-posted into the
// peer's credit word), so the peer never sends into a receive queue with no buffer
// and nothing depends on RNR retries. One-sided Writes, Reads and FetchAdds land
// here with no CPU work: the HCA checks them against the MRs.
#pragma once

#include <infiniband/verbs.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "proxy/fabric/event.h"
#include "proxy/fabric/region.h"
#include "proxy/fabric/verbs/verbs_bootstrap.h"
#include "proxy/verbs/qp_bundle.h"

namespace railyard::fabric::verbs {

class VerbsWorker;

/// See file comment. Owned by its Worker.
class VerbsTarget {
 public:
  VerbsTarget(VerbsWorker* worker, proxy::Fd fd);
  ~VerbsTarget();

  /// Runs the handshake, polls the CQs, returns credits and watches the bootstrap
  /// socket. False once the connection is over (closed by the peer or failed: a
  /// failure was reported as a kError event with op kNone). Never blocks.
  bool Progress();
  /// True when only a completion (or the peer) can give Progress work: set up (or
  /// over) with no credit return waiting to be posted. (VerbsWorker::Quiet.)
  /// True while the handshake runs (before the QPs are ready; until the peer's
  /// records come or the setup deadline passes): such connections are capped per
  /// Worker (VerbsWorker::kMaxSettingUp).
  bool SettingUp() const { return state_ < 2; }
  bool Idle() const { return state_ == 3 || (state_ == 2 && (creditInFlight_ || consumed_ == reported_)); }
  /// QpBundle::ArmCqs; true when the connection is over.
  bool ArmCqs() const { return qps_ != nullptr ? qps_->ArmCqs() : state_ == 3; }
  /// Test hook (VerbsWorker::ForgetBootstrapsForTesting): stop watching the bootstrap
  /// connection, as an outvoted keepalive verdict does.
  void ForgetBootstrapForTesting() { bootLost_ = true; }

 private:
  bool StepHandshake();
  bool Accept(const Handshake& h, std::string* why);
  bool PostRecv(uint32_t index);
  void Poll();
  /// Posts the credit word to the initiator when buffers were consumed since the last
  /// post; with `probe`, also when none were (the same value again: the initiator sees
  /// no change), as a liveness probe once the bootstrap connection no longer watches
  /// the peer (bootLost_): a dead initiator's HCA never answers it, and the retry-
  /// exceeded completion (or RAILYARD_TIMEOUT_MS without one) ends this connection
  /// with an error event rather than keeping its QPs and buffers for ever.
  void ReturnCredits(bool probe = false);
  void Failed(FabricErrc errc, int rail, std::string what);

  VerbsWorker* worker_;
  BootstrapChannel boot_;
  int state_ = 0;  ///< 0 reading, 1 sending, 2 ready, 3 over
  std::chrono::steady_clock::time_point since_;
  VerbsHello peer_{};
  std::unique_ptr<proxy::verbs::QpBundle> qps_;
  std::vector<char> mem_;  ///< credit source word, then the receive buffers
  const Region* region_ = nullptr;
  uint32_t credits_ = 0;
  uint64_t consumed_ = 0;  ///< buffers consumed and re-posted
  uint64_t reported_ = 0;  ///< value of the last credit write posted
  bool creditInFlight_ = false;
  std::chrono::steady_clock::time_point creditSent_{};  ///< when the credit write in flight was posted
  std::chrono::steady_clock::time_point lastWatch_;  ///< last look at the bootstrap socket
  /// Last work completion of this connection (BootstrapChannel::LostMeansDead).
  std::chrono::steady_clock::time_point lastCompletion_{};
  bool bootLost_ = false;  ///< its keepalive timed out while completions came: no longer watched
};

}  // namespace railyard::fabric::verbs
