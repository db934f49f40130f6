#include "storage/expert/pin_ledger.h"

#include "storage/expert/expert_error.h"

namespace railyard::expert {

Status PinLedger::Reserve(uint64_t bytes, const std::string& who) {
  std::lock_guard<std::mutex> lock(mu_);
  if (cap_ != 0 && (bytes > cap_ || used_ > cap_ - bytes)) {
    return ExpertError(ExpertErrc::kAdmissionRefused,
                       who + " needs " + std::to_string(bytes) + " pinned bytes; " + std::to_string(used_) + " of " +
                           std::to_string(cap_) + " are in use (RAILYARD_EXPERT_PIN_CAP)");
  }
  used_ += bytes;
  return Status::Ok();
}

void PinLedger::Release(uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  used_ -= bytes < used_ ? bytes : used_;
}

uint64_t PinLedger::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_;
}

}  // namespace railyard::expert
