// The expert peer's admission ledger: one per daemon, it caps the bytes all client
// connections together make the peer pin (RAILYARD_EXPERT_PIN_CAP). A connection
// reserves its share at connect and gives it back when it closes; going over the
// cap is refused there, before anything is registered.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>

#include "env/status.h"

namespace railyard::expert {

/// Thread-safe byte ledger.
class PinLedger {
 public:
  /// `capBytes` = 0: no cap.
  explicit PinLedger(uint64_t capBytes) : cap_(capBytes) {}
  /// Reserves `bytes` for `who`. ADMISSION_REFUSED (naming who, the request, what is
  /// in use and the cap) when it would go over the cap; nothing is reserved then.
  Status Reserve(uint64_t bytes, const std::string& who);
  /// Gives back bytes reserved earlier (clamped at what is in use).
  void Release(uint64_t bytes);
  uint64_t used() const;
  uint64_t cap() const { return cap_; }

 private:
  const uint64_t cap_;
  mutable std::mutex mu_;
  uint64_t used_ = 0;
};

}  // namespace railyard::expert
